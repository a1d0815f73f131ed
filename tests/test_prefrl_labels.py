"""``bayescrl prefs export`` / ``import``: labelling page, labels.json validation, answers.json merging."""

import json
import re
import shutil

import pytest

from bayescrl.cli import main
from bayescrl.prefrl import labels as L
from bayescrl.raters import EQUAL, SKIP

EVIL = "</script><script>alert(1)</script>"


def _segment(s, length=6, discrete=False):
    obs = [[0.1 * t + s, -0.2 * t, float(s)] for t in range(length)]
    actions = [[t % 3] for t in range(length)] if discrete else [[0.5 - 0.1 * t] for t in range(length)]
    return {"segment": s, "obs": obs, "actions": actions, "features": [1.0, 0.25 * s]}


def _pending(n=3, rnd=3, raters=("alice", "bob"), **extra):
    return {
        "env": "bayescrl/PointCircle-v0",
        "round": rnd,
        "iteration": 12,
        "segment_length": 6,
        "raters": list(raters) if raters is not None else None,
        "observation_names": None,
        "action_names": None,
        "queries": [
            {"id": f"r{rnd}q{i}", "left": _segment(10 * i, discrete=i == 1), "right": _segment(10 * i + 5)}
            for i in range(n)
        ],
        **extra,
    }


@pytest.fixture
def run(tmp_path):
    run = tmp_path / "run"
    (run / "queries").mkdir(parents=True)
    (run / "queries" / "pending.json").write_text(json.dumps(_pending()))
    return run


def _write(path, obj):
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def _answers(run):
    return json.loads((run / "queries" / "answers.json").read_text())


def _fail(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("error: ")
    return err[0]


def _embedded(html):
    m = re.search(r'<script type="application/json" id="bcrl-data">(.*?)</script>', html, re.S)
    assert m
    return json.loads(m.group(1))


def test_choice_codes_match_simulated_raters():
    assert L.CHOICE_CODES == {"left": 0, "right": 1, "equal": EQUAL, "skip": SKIP}


def test_export_import_round_trip(run, tmp_path, capsys):
    main(["prefs", "export", str(run)])
    out = capsys.readouterr().out.strip().splitlines()
    page = run / "queries" / "labels.html"
    assert len(out) == 1 and str(page) in out[0] and "bayescrl prefs import" in out[0]
    html = page.read_text()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    assert not re.search(r"<(link|img|iframe)\b|<script[^>]*\bsrc=", html)
    data = _embedded(html)  # what the page's script reads
    assert data["round"] == 3 and data["raters"] == ["alice", "bob"]
    assert [q["id"] for q in data["queries"]] == ["r3q0", "r3q1", "r3q2"]
    assert data["queries"][1]["left"]["obs"] == _segment(10)["obs"]
    assert data["queries"][1]["left"]["actions"] == [[0], [1], [2], [0], [1], [2]]
    assert data["queries"][2]["right"]["features"] == [1.0, 6.25]

    # what the page's download builds: labels in query order, each with the rater selected when clicked
    picks = {"r3q0": ("left", "alice"), "r3q1": ("equal", "bob"), "r3q2": ("skip", "alice")}
    lab = {
        "round": data["round"],
        "labels": [{"query": q, "choice": c, "rater": r} for q, (c, r) in picks.items()],
    }
    main(["prefs", "import", str(run), str(_write(tmp_path / "labels.json", lab))])
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "imported 3" in out[0] and "bayescrl train --resume" in out[0]
    assert _answers(run) == {
        "round": 3,
        "answers": [
            {"query": "r3q0", "y": 0, "rater": "alice"},
            {"query": "r3q1", "y": 2, "rater": "bob"},
            {"query": "r3q2", "y": -1, "rater": "alice"},
        ],
    }


def test_export_out_option(run, tmp_path, capsys):
    target = tmp_path / "elsewhere" / "page.html"
    main(["prefs", "export", str(run), "--out", str(target)])
    assert target.is_file() and not (run / "queries" / "labels.html").exists()
    assert str(target) in capsys.readouterr().out


def test_import_merges_and_counts_remaining(run, tmp_path):
    first = {"round": 3, "rater": "bob", "labels": [{"query": "r3q0", "choice": "right"}]}
    s = L.import_labels(run, _write(tmp_path / "a.json", first))
    assert (s["imported"], s["answered"], s["remaining"], s["total"]) == (1, 1, 2, 3)
    assert _answers(run)["answers"] == [{"query": "r3q0", "y": 1, "rater": "bob"}]
    second = {
        "round": 3,
        "labels": [
            {"query": "r3q2", "choice": "right", "rater": "bob"},
            {"query": "r3q2", "choice": "right", "rater": "bob"},  # the same label twice in one file: one
        ],
    }
    s = L.import_labels(run, _write(tmp_path / "b.json", second))
    assert (s["imported"], s["answered"], s["remaining"]) == (1, 2, 1)
    assert _answers(run)["answers"] == [
        {"query": "r3q0", "y": 1, "rater": "bob"},
        {"query": "r3q2", "y": 1, "rater": "bob"},
    ]
    third = {"round": 3, "labels": [{"query": "r3q0", "choice": "equal", "rater": "alice"}]}  # replaces
    s = L.import_labels(run, _write(tmp_path / "c.json", third))
    assert (s["answered"], s["remaining"]) == (2, 1)
    assert _answers(run)["answers"][0] == {"query": "r3q0", "y": 2, "rater": "alice"}


def test_answers_of_an_older_round_are_replaced(run, tmp_path):
    (run / "queries" / "answers.json").write_text(
        json.dumps({"round": 2, "answers": [{"query": "r3q1", "y": 0, "rater": "alice"}]})
    )
    L.import_labels(
        run,
        _write(
            tmp_path / "l.json", {"round": 3, "labels": [{"query": "r3q0", "choice": "left", "rater": "bob"}]}
        ),
    )
    assert _answers(run) == {"round": 3, "answers": [{"query": "r3q0", "y": 0, "rater": "bob"}]}


GOOD = {"query": "r3q0", "choice": "left", "rater": "alice"}


@pytest.mark.parametrize(
    "labels, field",
    [
        ({"round": 3, "labels": [GOOD, {**GOOD, "query": "r9q9"}]}, "labels.query[1] = 'r9q9'"),
        ({"round": 3, "labels": [{**GOOD, "choice": "LEFT"}]}, "labels.choice[0] = 'LEFT'"),
        ({"round": 3, "labels": [{**GOOD, "choice": 0}]}, "labels.choice[0] = 0"),
        ({"round": 3, "labels": [{**GOOD, "rater": "mallory"}]}, "labels.rater[0] = 'mallory'"),
        ({"round": 3, "rater": "eve", "labels": [GOOD]}, "rater = 'eve'"),
        ({"round": 3, "labels": [{"query": "r3q0", "choice": "left"}]}, "labels.rater[0] = None"),
        ({"round": 2, "labels": [GOOD]}, "round = 2"),
        ({"labels": [GOOD]}, "round = None"),
        ({"round": "3", "labels": [GOOD]}, "round = '3'"),
        ({"round": 3, "labels": [GOOD], "path": "/etc/passwd"}, "labels.json.path = '/etc/passwd'"),
        ({"round": 3, "labels": [{**GOOD, "file": "x.py"}]}, "labels.file[0] = 'x.py': unknown key"),
        ({"round": 3, "labels": ["r3q0"]}, "labels[0] = 'r3q0'"),
        ({"round": 3, "labels": {"r3q0": "left"}}, "labels = {"),
        ([GOOD], "labels.json = 'list'"),
        ("{not json", "labels = "),
    ],
)
def test_bad_labels_exit_2_naming_the_field(run, tmp_path, capsys, labels, field):
    path = _write(tmp_path / "labels.json", labels)
    line = _fail(["prefs", "import", str(run), str(path)], capsys)
    assert line.startswith(f"error: {field}"), line
    assert not (run / "queries" / "answers.json").exists()


def test_not_json_message_names_the_file(run, tmp_path, capsys):
    path = _write(tmp_path / "labels.json", "{not json")
    line = _fail(["prefs", "import", str(run), str(path)], capsys)
    assert str(path) in line and "not valid JSON" in line


def test_missing_files_exit_2(tmp_path, run, capsys):
    empty = tmp_path / "empty-run"
    empty.mkdir()
    line = _fail(["prefs", "export", str(empty)], capsys)
    assert line.startswith("error: run = ") and str(empty) in line and "no pending queries" in line
    line = _fail(["prefs", "import", str(empty), str(tmp_path / "x.json")], capsys)
    assert "no pending queries" in line
    line = _fail(["prefs", "import", str(run), str(tmp_path / "missing.json")], capsys)
    assert line.startswith("error: labels = ") and "file not found" in line


def test_bad_pending_exit_2(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "queries").mkdir(parents=True)
    bad = _pending()
    bad["queries"][1]["id"] = "r3q0"
    (run / "queries" / "pending.json").write_text(json.dumps(bad))
    assert "pending.queries.id[1] = 'r3q0'" in _fail(["prefs", "export", str(run)], capsys)
    (run / "queries" / "pending.json").write_text(json.dumps(_pending(n=0)))
    assert "no pending queries" in _fail(["prefs", "export", str(run)], capsys)


def test_crafted_names_are_escaped(tmp_path):
    run = tmp_path / "run"
    (run / "queries").mkdir(parents=True)
    p = _pending(raters=["alice", EVIL], observation_names=["x", EVIL, "<!--"], action_names=["&amp;"])
    p["queries"][0]["id"] = EVIL
    p["env"] = EVIL
    (run / "queries" / "pending.json").write_text(json.dumps(p))
    html = L.export_queries(run).read_text()
    assert EVIL not in html and "<!--" not in html and "&amp;" not in html
    # the only script elements are the data tag and the page's own code
    assert len(re.findall(r"<script\b", html)) == 2 and len(re.findall(r"</script>", html)) == 2
    data = _embedded(html)
    assert data["raters"] == ["alice", EVIL] and data["observation_names"][1] == EVIL
    assert data["queries"][0]["id"] == EVIL and data["action_names"] == ["&amp;"]
    assert "innerHTML" not in html and "insertAdjacentHTML" not in html and "eval(" not in html
    # labels by the crafted rater still import (the name is data, matched exactly)
    lab = {"round": 3, "labels": [{"query": EVIL, "choice": "right", "rater": EVIL}]}
    L.import_labels(run, _write(tmp_path / "l.json", lab))
    assert _answers(run)["answers"] == [{"query": EVIL, "y": 1, "rater": EVIL}]


def test_placeholder_text_in_data_is_not_substituted(tmp_path):
    run = tmp_path / "run"
    (run / "queries").mkdir(parents=True)
    (run / "queries" / "pending.json").write_text(json.dumps(_pending(env="%SCRIPT% %DATA% %CSP%")))
    html = L.export_queries(run).read_text()
    assert _embedded(html)["env"] == "%SCRIPT% %DATA% %CSP%"


def test_without_named_raters_any_name_is_accepted(tmp_path):
    run = tmp_path / "run"
    (run / "queries").mkdir(parents=True)
    (run / "queries" / "pending.json").write_text(json.dumps(_pending(raters=None)))
    L.export_queries(run)
    L.import_labels(run, _write(tmp_path / "l.json", {"round": 3, "labels": [{**GOOD, "rater": "carol"}]}))
    assert _answers(run)["answers"] == [{"query": "r3q0", "y": 0, "rater": "carol"}]
    with pytest.raises(L.DataError, match=r"labels.rater\[0\] = ''"):
        L.import_labels(run, _write(tmp_path / "l.json", {"round": 3, "labels": [{**GOOD, "rater": ""}]}))


def _browser():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no system chromium (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("python package playwright not installed (pip install 'bayescrl[browser]')")
    return exe, sync_playwright


def test_page_in_a_real_browser(run, tmp_path):
    exe, sync_playwright = _browser()
    p = _pending(raters=["alice", EVIL], observation_names=["x", EVIL, "z"])
    (run / "queries" / "pending.json").write_text(json.dumps(p))
    page_file = L.export_queries(run)
    errors, dialogs = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True)
        try:
            ctx = browser.new_context(accept_downloads=True)
            page = ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(page_file.as_uri())
            assert page.locator("section.query").count() == 3
            assert page.locator("#progress").inner_text() == "0 of 3 labelled"
            # each panel: observation and action plots, one line per dimension
            left0 = page.locator("section.query").nth(0).locator(".panel[data-side=left]")
            assert (
                left0.locator("svg.plot").count() == 2
                and left0.locator("svg.plot").nth(0).locator("polyline").count() == 3
            )
            assert "6 steps" in left0.inner_text()
            assert EVIL in left0.locator(".legend").nth(0).inner_text()  # shown as text, not run
            cards = page.locator("section.query")
            cards.nth(0).locator("button[data-choice=left]").click()
            page.select_option("#rater", EVIL)
            cards.nth(1).locator("button[data-choice=equal]").click()
            page.select_option("#rater", "alice")
            page.keyboard.press("2")  # the current query is now the third one
            assert page.locator("#progress").inner_text() == "3 of 3 labelled"
            assert "right better" in cards.nth(2).locator(".status").inner_text()
            with page.expect_download() as info:
                page.click("#download")
            download = info.value
            assert download.suggested_filename == "labels.json"
            saved = tmp_path / "downloaded.json"
            download.save_as(saved)
            # re-scaling redraws the plots and keeps the labels
            page.check("#perdim")
            assert page.locator("#progress").inner_text() == "3 of 3 labelled"
            assert "min" in cards.nth(0).locator("svg.plot").nth(0).inner_html()
            # clicking a chosen answer again clears it; a reload restores the labels kept by the browser
            cards.nth(0).locator("button[data-choice=left]").click()
            assert page.locator("#progress").inner_text() == "2 of 3 labelled"
            page.reload()
            assert page.locator("#progress").inner_text() == "2 of 3 labelled"
            assert "Restored 2 labels" in page.locator("#message").inner_text()
        finally:
            browser.close()
    assert not errors and not dialogs, (errors, dialogs)
    assert json.loads(saved.read_text()) == {
        "round": 3,
        "labels": [
            {"query": "r3q0", "choice": "left", "rater": "alice"},
            {"query": "r3q1", "choice": "equal", "rater": EVIL},
            {"query": "r3q2", "choice": "right", "rater": "alice"},
        ],
    }
    s = L.import_labels(run, saved)
    assert (s["imported"], s["remaining"]) == (3, 0)
    assert [a["y"] for a in _answers(run)["answers"]] == [0, 2, 1]
