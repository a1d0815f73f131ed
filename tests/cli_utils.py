"""Helpers shared by the command-line tests."""

from bayescrl.cli import main


def run(args: list[str], capsys) -> tuple[int, str]:
    """``bayescrl`` exit code (0 on success) and stderr."""
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err
