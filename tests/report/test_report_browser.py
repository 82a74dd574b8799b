#!/usr/bin/env python3
"""kb report's pages in headless Chromium: no console errors, every chart drawn, tables as the traces say.

usage: test_report_browser.py KB

Writes a trace set (two authors, a failure, a solution named like an HTML script), a calling record and an
agent trace, runs `kb report`, then
  - loads each page in Chromium and fails on any console error (a page with a deliberate error proves the
    check sees one);
  - reads the page's layout back (a copy with a probe script appended) and checks, in a screenshot, that
    every chart's area holds a drawing: many distinct colours and a good share of non-background pixels
    (the same page with its chart script removed proves the check sees a blank chart);
  - parses the rendered DOM's tables and compares them with numbers computed here from the trace lines.
Exit 77 (skipped) when no Chromium is installed.
"""
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

KB = sys.argv[1]
EVIL = "<script>alert(1)</script>"
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def trace_line(definition, uuid, axes, solution, status, latency=0.0, reference=0.0, log="", rel_noise=None):
    ev = {"status": status, "environment": {"hardware": "Test CPU"}, "timestamp": "2025-01-01T00:00:00", "log": log}
    if status == "PASSED":
        ev["correctness"] = {"max_relative_error": 0.0, "max_absolute_error": 0.001}
        perf = {"latency_ms": latency, "reference_latency_ms": reference, "speedup_factor": reference / latency}
        if rel_noise is not None:
            perf["extra"] = {"timing": "wall_clock", "samples": 20, "rel_noise": rel_noise}
        ev["performance"] = perf
    elif status == "INCORRECT_NUMERICAL":
        ev["correctness"] = {"max_relative_error": 1.0, "max_absolute_error": 2.0}
    return json.dumps({"definition": definition, "workload": {"uuid": uuid, "axes": axes, "inputs": {}},
                       "solution": solution, "evaluation": ev})


# (author, op_type, definition, uuid, axes, solution, status, latency, reference, log)
ROWS = [
    ("alice", "gemm", "gemm_t", "g1", {"M": 1}, "alice_gemm", "PASSED", 0.10, 0.20, ""),
    ("alice", "gemm", "gemm_t", "g2", {"M": 16}, "alice_gemm", "PASSED", 0.40, 0.50, ""),
    ("alice", "gemm", "gemm_t", "g3", {"M": 256}, "alice_gemm", "PASSED", 3.00, 4.00, ""),
    ("alice", "gemm", "gemm_t", "g4", {"M": 4096}, "alice_gemm", "INCORRECT_NUMERICAL", 0, 0,
     "mismatch: 12 of 4096 elements outside atol=0.01\n<i>not italic</i>"),
    ("bob", "gemm", "gemm_t", "g1", {"M": 1}, EVIL, "PASSED", 0.05, 0.20, ""),
    ("bob", "gemm", "gemm_t", "g2", {"M": 16}, EVIL, "PASSED", 0.60, 0.50, ""),
    ("bob", "gemm", "gemm_t", "g3", {"M": 256}, EVIL, "PASSED", 2.00, 4.00, ""),
    ("bob", "gemm", "gemm_t", "g4", {"M": 4096}, EVIL, "PASSED", 30.0, 40.0, ""),
    ("bob", "norm", "norm_t", "n1", {"batch_size": 1}, "bob_norm", "PASSED", 0.01, 0.02, ""),
    ("bob", "norm", "norm_t", "n2", {"batch_size": 64}, "bob_norm", "PASSED", 0.05, 0.04, ""),
    ("bob", "norm", "norm_t", "n3", {"batch_size": 512}, "bob_norm", "COMPILE_ERROR", 0, 0, "norm.cu(3): error: expected a ';'"),
]


def write_inputs(root):
    traces = os.path.join(root, "set")
    for author, op, definition, uuid, axes, solution, status, lat, ref, log in ROWS:
        folder = os.path.join(traces, "traces", author, op)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, definition + ".jsonl"), "a") as f:
            f.write(trace_line(definition, uuid, axes, solution, status, lat, ref, log, 0.02) + "\n")
    record = os.path.join(root, "record.json")
    with open(record, "w") as f:
        json.dump({"model": "org/tiny", "framework": "vLLM", "step": "decode",
                   "kernels": [{"id": "gemm_t", "count": 4, "axes": {"M": 16}},
                               {"id": "norm_t", "count": 2, "axes": {"batch_size": 64}},
                               {"id": "absent_kernel", "count": 1}]}, f)
    agent = os.path.join(root, "agent.json")
    with open(agent, "w") as f:
        json.dump([{"type": "llm_request", "model": "m1", "annotation": "first",
                    "conversation": [{"role": "user", "content": "make gemm_t faster " + EVIL}],
                    "response": {"model": "m1", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                        "role": "assistant", "content": None,
                        "tool_calls": [{"id": "c1", "type": "function",
                                        "function": {"name": "compile", "arguments": "{\"file\": \"k.cu\"}"}}]}}]}},
                   {"type": "tool_call", "tool_name": "compile", "arguments": {"file": "k.cu"}, "result": "ok"},
                   {"type": "llm_request", "model": "m1", "conversation": [{"role": "user", "content": "done?"}],
                    "response": {"model": "m1", "choices": [{"index": 0, "finish_reason": "stop",
                                                            "message": {"role": "assistant", "content": "yes"}}]}}], f)
    return traces, record, agent


class Tables(html.parser.HTMLParser):
    """Every <table> of a page as rows of cell texts, keyed by its id or class."""

    def __init__(self):
        super().__init__()
        self.tables, self.current, self.row, self.cell, self.name = [], None, None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.current = {"name": a.get("id") or a.get("class") or "", "rows": []}
        elif tag == "tr" and self.current is not None:
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = ""
        elif tag == "br" and self.cell is not None:
            self.cell += " "

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.row.append(self.cell.strip())
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.current["rows"].append(self.row)
            self.row = None
        elif tag == "table" and self.current is not None:
            self.tables.append(self.current)
            self.current = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def chromium(browser, args, timeout=120):
    base = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--force-device-scale-factor=1", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000"]
    return subprocess.run(base + args, capture_output=True, text=True, timeout=timeout)


def console_errors(stderr):
    """Console messages the page produced at warning level or above, and uncaught exceptions."""
    bad = []
    for line in stderr.splitlines():
        if "CONSOLE" in line or "Uncaught" in line:
            if ":INFO:CONSOLE" in line and "Uncaught" not in line and "rror" not in line:
                continue
            bad.append(line)
    return bad


PROBE = """<script>
(function () {
  var out = {height: document.documentElement.scrollHeight, charts: []};
  document.querySelectorAll('canvas').forEach(function (c) {
    var r = c.getBoundingClientRect();
    out.charts.push({id: c.id, x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height});
  });
  var pre = document.createElement('pre');
  pre.id = 'kb-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def probe_layout(browser, page, workdir):
    probe = os.path.join(workdir, "probe_" + os.path.basename(page))
    with open(page) as f:
        text = f.read()
    with open(probe, "w") as f:
        f.write(text.replace("</body></html>", PROBE + "</body></html>"))
    r = chromium(browser, ["--window-size=1280,900", "--dump-dom", "file://" + probe])
    start = r.stdout.find('<pre id="kb-probe">')
    if start < 0:
        return None
    end = r.stdout.find("</pre>", start)
    return json.loads(html.unescape(r.stdout[start + len('<pre id="kb-probe">'):end]))


def read_png(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG, no other library needed."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), "unexpected PNG format %d/%d" % (depth, ctype)
            channels = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def drawn(rows, chart):
    """A chart area holds a drawing: several colours, and at least 1% of its pixels not background."""
    x0, y0 = int(chart["x"]) + 2, int(chart["y"]) + 2
    x1, y1 = int(chart["x"] + chart["w"]) - 2, int(chart["y"] + chart["h"]) - 2
    if y1 > len(rows) or x1 > len(rows[0]) or x1 <= x0 or y1 <= y0:
        return False, "outside the screenshot"
    colours, ink, total = set(), 0, 0
    for y in range(y0, y1, 2):
        for x in range(x0, x1, 2):
            p = rows[y][x]
            colours.add(p)
            ink += p != (255, 255, 255)
            total += 1
    return len(colours) >= 8 and ink >= total // 100, "%d colours, %.1f%% ink" % (len(colours), 100.0 * ink / total)


def check_charts(browser, page, workdir, expect_drawn=True):
    layout = probe_layout(browser, page, workdir)
    check(layout is not None, "%s: the probe read the layout back" % page)
    if layout is None:
        return
    check(len(layout["charts"]) > 0, "%s: has charts" % page)
    shot = os.path.join(workdir, "shot_" + os.path.basename(page) + ".png")
    height = min(int(layout["height"]) + 20, 16000)
    r = chromium(browser, ["--window-size=1280,%d" % height, "--screenshot=" + shot, "file://" + page])
    check(os.path.exists(shot), "%s: screenshot written (%s)" % (page, r.stderr[-300:]))
    if not os.path.exists(shot):
        return
    _, _, rows = read_png(shot)
    for chart in layout["charts"]:
        ok, why = drawn(rows, chart)
        if expect_drawn:
            check(ok, "%s: chart %s drawn (%s)" % (page, chart["id"], why))
        else:
            check(not ok, "%s: chart %s blank without its script (%s)" % (page, chart["id"], why))
    return layout


def main():
    browser = find_chromium()
    if not browser:
        print("skipped: no chromium installed (apt-get install chromium)")
        return 77
    work = tempfile.mkdtemp(prefix="kb_report_browser_")
    try:
        traces, record, agent = write_inputs(work)
        out = os.path.join(work, "out")
        r = subprocess.run([KB, "report", "--out", out, "--records", record, "--agent-traces", agent, "--title",
                            "browser test", traces], capture_output=True, text=True)
        check(r.returncode == 0, "kb report exits 0: " + r.stderr)
        if r.returncode != 0:
            return 1
        pages = [os.path.join(out, p) for p in ("index.html", "models.html", "agents.html")]
        for p in pages:
            check(os.path.exists(p), p + " written")

        # The error check sees errors.
        broken = os.path.join(work, "broken.html")
        with open(broken, "w") as f:
            f.write("<!DOCTYPE html><html><body><script>throw new Error('kb-probe-error');</script></body></html>")
        check(console_errors(chromium(browser, ["--dump-dom", "file://" + broken]).stderr),
              "a page that throws is seen as one with console errors")
        for p in pages:
            r = chromium(browser, ["--dump-dom", "file://" + p])
            errors = console_errors(r.stderr)
            check(not errors, "%s: no console errors: %s" % (p, errors))
            # Text nodes serialize with &lt;: the raw tag appears only where a script element was made.
            check(EVIL not in r.stdout, "%s: no script element made from a name in the traces" % p)
            if not p.endswith("models.html"):
                check("&lt;script&gt;alert(1)&lt;/script&gt;" in r.stdout, "%s: the name shown as text" % p)
            if p.endswith("index.html"):
                dom = r.stdout
            if p.endswith("agents.html"):
                order = [dom_i for dom_i in (r.stdout.find("1. LLM request"), r.stdout.find("2. Tool call"),
                                             r.stdout.find("3. LLM request"))]
                check(-1 not in order and order == sorted(order), "agents.html: entries in order %s" % order)
            if p.endswith("models.html"):
                t = Tables()
                t.feed(r.stdout)
                est = [tb for tb in t.tables if tb["name"] == "estimate"]
                check(len(est) == 1, "models.html: one estimate table")
                if est:
                    rows = {row[0]: row for row in est[0]["rows"][1:]}
                    # gemm_t at M=16: reference 0.5 ms, best alice_gemm 0.4 ms, x4.
                    check(rows.get("gemm_t", [""] * 6)[4:6] == ["0.5000", "0.4000"], "models.html: gemm_t %s" % rows.get("gemm_t"))
                    check("absent_kernel" in rows and "no trace records" in rows["absent_kernel"][-1],
                          "models.html: the kernel without traces is listed with its reason")

        # Charts drawn; the same page without its drawing script is seen as blank.
        layout = check_charts(browser, pages[0], work)
        if layout:
            # 1 author fast_p + per definition: one latency chart (one var axis) and one fast_p.
            check(len(layout["charts"]) == 5, "index.html: 5 charts, got %d" % len(layout["charts"]))
        with open(pages[0]) as f:
            text = f.read()
        undrawn = os.path.join(work, "undrawn.html")
        cut = text.rfind("<script>")
        with open(undrawn, "w") as f:
            f.write(text[:cut] + "</body></html>\n")
        check_charts(browser, undrawn, work, expect_drawn=False)

        # The tables against the trace lines.
        t = Tables()
        t.feed(dom)
        matrices = [tb for tb in t.tables if tb["name"] == "matrix"]
        speedups = [tb for tb in t.tables if tb["name"] == "speedups"]
        check(len(matrices) == 2 and len(speedups) == 2, "index.html: a matrix and a speedup table per definition")
        for definition, matrix, speed in zip(["gemm_t", "norm_t"], matrices, speedups):
            mine = [row for row in ROWS if row[2] == definition]
            workloads = sorted({(row[4][next(iter(row[4]))], row[3]) for row in mine})
            header = matrix["rows"][0][1:]
            check(header == ["%s=%d" % (next(iter(mine[0][4])), v) for v, _ in workloads],
                  "%s: workload columns %s" % (definition, header))
            for row in matrix["rows"][2:]:
                solution = row[0]
                for (value, uuid), cell in zip(workloads, row[1:]):
                    line = [x for x in mine if x[5] == solution and x[3] == uuid]
                    if not line:
                        check(cell == "-", "%s/%s/%s: empty cell" % (definition, solution, uuid))
                        continue
                    _, _, _, _, _, _, status, lat, ref, _ = line[0]
                    if status == "PASSED":
                        want = "%.4f %.2fx" % (lat, ref / lat)
                    else:
                        want = status + " [" 
                    check(cell.startswith(want), "%s/%s/%s: cell %r, want %r" % (definition, solution, uuid, cell, want))
            for row in speed["rows"][1:]:
                solution = row[0]
                timed = [x for x in mine if x[5] == solution and x[6] == "PASSED"]
                product = 1.0
                for x in timed:
                    product *= x[8] / x[7]
                want = "%.2fx" % (product ** (1.0 / len(timed)))
                check(row[4] == want, "%s/%s: geomean speedup %s, want %s" % (definition, solution, row[4], want))
        authors = [tb for tb in t.tables if tb["name"] == "authors-table"]
        check(len(authors) == 1, "one authors table")
        if authors:
            rates = {row[0]: row[5] for row in authors[0]["rows"][1:]}
            # gemm_t: bob wins g1, g3, g4; alice g2. norm_t: bob wins n1, n2. bob entered 7, alice 4.
            check(rates == {"bob": "71.4%", "alice": "25.0%"}, "win rates %s" % rates)
        check("&lt;i&gt;not italic&lt;/i&gt;" in dom and "<i>not italic</i>" not in dom, "failure messages are text")
    finally:
        if not FAILURES:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("kept", work)
    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
