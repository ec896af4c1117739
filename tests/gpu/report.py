#!/usr/bin/env python3
"""OUT/device_report.md from device_check.sh's logs and GoogleTest JSON files.

  report.py OUT DEVICE_LOG INFO_TXT NAME...   # reads OUT/NAME.json (and OUT/NAME.log), OUT/*_gpt2.txt

Exits 1 if a result is missing, a test failed, or a test skipped that should
run on a GPU machine (all but EXPECTED_SKIPS).
"""
import json
import re
import sys
from pathlib import Path

# tests that skip *because* a GPU is present
EXPECTED_SKIPS = {"NnCuda.NoDeviceIsReportedNotFatal"}


def read(p):
    try:
        return Path(p).read_text(errors="replace")
    except OSError:
        return ""


def skip_reasons(log):
    """{test: reason} from the console log (the message gtest prints before [  SKIPPED ])."""
    out = {}
    for m in re.finditer(r"\[ RUN      \] (\S+)\n(.*?)\[  SKIPPED \] \1", log, re.S):
        body = m.group(2).replace("Skipped\n", "").strip().splitlines()
        # "file.cpp:33: why" -> "why"
        out[m.group(1)] = " ".join(re.sub(r"^\S+:\d+: ", "", line) for line in body)[:200]
    return out


def main():
    out, device_log, info = Path(sys.argv[1]), read(sys.argv[2]), read(sys.argv[3])
    names = sys.argv[4:]
    gpus = [l for l in device_log.splitlines() if l.startswith("GPU ")]
    query = [l[5:] for l in device_log.splitlines() if l.startswith("gpu: ")]
    lines = ["# ymlopt CUDA device check", ""]
    lines += ["- GPU: " + (", ".join(gpus) or "**none seen by nvidia-smi**")]
    if query:
        lines += ["- name, driver, memory, compute capability: " + "; ".join(query)]
    host = [l[len("== host: "):] for l in device_log.splitlines() if l.startswith("== host: ")]
    if host:
        lines += ["- host: " + host[0]]
    lines += ["- " + l for l in info.splitlines() if l.startswith("CUDA kernels:")]
    lines += ["- " + l for l in device_log.splitlines() if l.startswith(("dlopen ", "BAD ", "LDD CHECK"))]
    lines += ["- `ymlopt components` lines marked cuda: %d" % sum("cuda]" in l for l in info.splitlines())]
    lines.append("")

    bad = []
    for name in names:
        path = out / (name + ".json")
        reasons = skip_reasons(read(out / (name + ".log")))
        lines += ["## " + name, ""]
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            bad.append("%s: no results (%s)" % (name, e))
            lines += ["**no results**: %s; the log's tail:" % e, "", "```"]
            lines += read(out / (name + ".log")).splitlines()[-20:] + ["```", ""]
            continue
        lines += ["| test | result | time |", "|---|---|---|"]
        counts = {"passed": 0, "FAILED": 0, "skipped": 0, "expected skip": 0}
        skipped = {}  # reason -> tests
        for suite in data.get("testsuites", []):
            for t in suite.get("testsuite", []):
                full = "%s.%s" % (suite["name"], t["name"])
                if t.get("failures"):
                    res = "FAILED"
                    msg = t["failures"][0].get("failure", "").splitlines()
                    bad.append("%s: %s failed: %s" % (name, full, " ".join(msg[:2])[:200]))
                elif t.get("result") == "SKIPPED":
                    res = "expected skip" if full in EXPECTED_SKIPS else "skipped"
                    if res == "skipped":
                        skipped.setdefault(reasons.get(full, "?"), []).append(t["name"])
                elif t.get("status") == "NOTRUN":
                    continue
                else:
                    res = "passed"
                counts[res] += 1
                shown = res if res == "passed" else "**%s**" % res
                why = (" (%s)" % reasons[full]) if full in reasons else ""
                lines.append("| %s | %s%s | %s |" % (full, shown, why, t.get("time", "?")))
        lines += ["", ", ".join("%d %s" % (v, k) for k, v in counts.items()) + "; total " + data.get("time", "?"), ""]
        for why, tests in skipped.items():
            bad.append("%s: %d skipped (%s): %s" % (name, len(tests), why, ", ".join(tests)))
        if sum(counts.values()) == 0:
            bad.append("%s: no tests ran" % name)

    # the StarPU runs on CPU + GPU workers (device_check.sh gpt2_on)
    for path in sorted(out.glob("*_gpt2.txt")):
        text = read(path).strip()
        lines += ["## " + path.stem, "", "```"] + text.splitlines() + ["```", ""]
        last = text.splitlines()[-1] if text else "empty"
        if "PASS" not in last:
            bad.append("%s: %s" % (path.stem, last))

    verdict = "FAIL" if bad else "PASS"
    lines[1:1] = ["", "**%s**" % verdict] + ["- " + b for b in bad]
    (out / "device_report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
