"""Rules the test suite keeps about itself.

Speed is asserted as a ratio against a peer measured in the same run, never as an absolute time: shared
CI machines drift by 2-3x (a 40 s test took 156 s beside two busy benchmark processes), so a wall-clock
bound either fails for nothing or is set so loose that it guards nothing. A hang is caught by the
subprocess or loop timeouts instead."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# an assert comparing a clock difference or a wall time with a number, or excusing itself by the load
ABSOLUTE_TIME = re.compile(
    r"assert .*(?:getloadavg|(?:time|perf_counter|monotonic)\(\) - \w+ *<|\bwall(?:_s)? *< *\d)"
)


def _absolute_time_asserts(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if ABSOLUTE_TIME.search(line)]


def test_the_rule_catches_what_it_forbids():
    assert _absolute_time_asserts("    assert wall < 60 or os.getloadavg()[0] > 4, wall")
    assert _absolute_time_asserts("    assert time.time() - t0 < 60, times")
    assert _absolute_time_asserts("    assert time.perf_counter() - start < 2.5")
    assert not _absolute_time_asserts("    assert compiled_s < 0.8 * eager_s  # a ratio against a peer")
    assert not _absolute_time_asserts("    deadline = time.time() + 400")


def test_no_test_asserts_an_absolute_time():
    hits = [
        f"{p.name}: {line}"
        for p in sorted(TESTS.glob("*.py"))
        if p.name != Path(__file__).name
        for line in _absolute_time_asserts(p.read_text(encoding="utf-8"))
    ]
    assert not hits, "absolute wall-clock bounds in tests (use a ratio against a peer):\n" + "\n".join(hits)
