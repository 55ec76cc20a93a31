#!/usr/bin/env python3
"""Render docs/benchmarks.md from the measurement data in docs/benchmarks/.

Usage (from the repository root; Python 3 standard library only):

    python3 scripts/render_benchmarks.py            # write docs/benchmarks.md
    python3 scripts/render_benchmarks.py --check    # exit 1 if docs/benchmarks.md is stale

The data: docs/benchmarks/<slug>.jsonl holds one JSON object per line, one line per measurement
(a row of a table, or one quoted set of figures); docs/benchmarks/index.json maps each slug to its
title, description and the descriptive keys to show as columns. The record schema is documented in
the rendered page's introduction (INTRO below). Every record is validated; a malformed one stops the
render with the file and line.
"""
import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "benchmarks"
OUT = ROOT / "docs" / "benchmarks.md"

REQUIRED = ("date", "device", "commit", "command", "what", "figures")
# Keys rendered in their own places, never as generic columns.
SPECIAL = set(REQUIRED) | {"command_note", "source", "given", "note", "superseded_by", "default"}

INTRO = """\
# Benchmarks

Every measurement of this project, as data: one JSON object per line in
[`docs/benchmarks/<slug>.jsonl`](benchmarks/), one line per measurement (a row of a table or
one quoted set of figures), with the titles and descriptions in
[`docs/benchmarks/index.json`](benchmarks/index.json). This page is generated from them by
`python3 scripts/render_benchmarks.py`; do not edit it by hand. CI runs
`python3 scripts/render_benchmarks.py --check`, which fails when this page is not what the data
renders to.

## The record

| key | meaning |
|---|---|
| `date` | `YYYY-MM-DD`: the day of the measurement as its text states it, else the day of the commit that recorded it |
| `device` | the device as its adapter names it, e.g. `NVIDIA H100 80GB HBM3`, `NVIDIA H200`, `lavapipe (llvmpipe), 2-core x86-64`; `not stated` where the record did not say |
| `commit` | short hash of the commit that recorded the measurement |
| `command` | the command that measured it; `command_note` says where it is reconstructed rather than recorded |
| `what` | what was measured |
| `figures` | named numbers, the unit in the name (`_ms`, `_us`, `_GBps`, `_pct`, `_over_cufft`, `speedup_`) |
| `given` | for training results: what the optimiser was handed rather than learned (fixed permutations, frozen stages, a constructed start); "learned" means learned by the optimiser from random weights |
| `note` | the conditions in the original words where they are not plain |
| `superseded_by` | set on measurements that a later one replaces (kept as history) |
| `default` | for `kernel-defaults`: the code item whose value the measurement chose |
| `source` | where the figure was first written down (file and line at the commit the data was collected from) |

Other keys (`n`, `batch`, `win`, `hop`, `signals`, `k`, `backend`, `compiler`, `runtime`,
`precision`, `target`, `model`, ...) describe the configuration. A figure is a number, a range
`{"min": a, "max": b}` (rendered `a–b`: the spread over processes, rounds or seeds), or a list
(rendered `a / b`: one value per process, round or listed configuration, in the order the record
states). Figures are copied as measured, never rounded.

## Adding a measurement

Append one line to the slug's file (a new slug also needs its entry in `index.json`), with the
keys above and the exact command, then run `python3 scripts/render_benchmarks.py` and commit the
data and this page together. Keep old lines: a re-measurement is a new line with its own date
(mark the old one with `superseded_by` where it is replaced). Sections list the newest
measurements first.

## Same-run anchors

Ratios to cuFFT and to PyTorch come from anchors measured in the same run on the same GPU, by
`scripts/anchor.py` (PyTorch with CUDA), whose JSON lines the benches read with `--anchor`:

```sh
python3 scripts/anchor.py --n 1024 --batch 32768 >> anchor.jsonl
learned-fft --backend cuda bench butterfly --n 1024 --batch 32768 --anchor anchor.jsonl
python3 scripts/anchor.py --stft --win 64 --hop 16 --signals 64 --samples 48000 >> anchor.jsonl
learned-fft --backend cuda bench spectral --win 64 --hop 16 --signals 64 --samples 48000 --anchor anchor.jsonl
```
"""


def fail(msg):
    print(f"render_benchmarks: {msg}", file=sys.stderr)
    sys.exit(1)


def valid_figure(v):
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    if isinstance(v, dict):
        return set(v) == {"min", "max"} and all(valid_figure(x) for x in v.values())
    if isinstance(v, list):
        return len(v) > 0 and all(valid_figure(x) for x in v)
    return False


def load():
    index_path = DATA / "index.json"
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        fail(f"{index_path.relative_to(ROOT)}: {e}")
    files = sorted(p.stem for p in DATA.glob("*.jsonl"))
    for slug in files:
        if slug not in index:
            fail(f"docs/benchmarks/{slug}.jsonl has no entry in index.json")
    data = {}
    for slug, meta in index.items():
        for key in ("title", "description", "columns"):
            if key not in meta:
                fail(f"index.json: {slug} lacks {key!r}")
        path = DATA / f"{slug}.jsonl"
        if not path.exists():
            fail(f"index.json names {slug}, but docs/benchmarks/{slug}.jsonl does not exist")
        records = []
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"docs/benchmarks/{slug}.jsonl:{i}"
            if not line.strip():
                fail(f"{where}: empty line")
            try:
                rec = json.loads(line)
            except ValueError as e:
                fail(f"{where}: not JSON ({e})")
            if not isinstance(rec, dict):
                fail(f"{where}: not a JSON object")
            for key in REQUIRED:
                if key not in rec:
                    fail(f"{where}: lacks {key!r}")
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(rec["date"])):
                fail(f"{where}: date {rec['date']!r} is not YYYY-MM-DD")
            if not re.fullmatch(r"[0-9a-f]{7,40}", str(rec["commit"])):
                fail(f"{where}: commit {rec['commit']!r} is not a hash")
            figs = rec["figures"]
            if not isinstance(figs, dict) or not figs:
                fail(f"{where}: figures must be a non-empty object")
            for k, v in figs.items():
                if not valid_figure(v):
                    fail(f"{where}: figure {k!r} must be a number, {{min, max}} or a list of them")
            records.append(rec)
        data[slug] = records
    return index, data


def fmt_num(v):
    if isinstance(v, int):
        return str(v)
    s = repr(v)
    s = re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m.group(1) == "-" else "") + m.group(2), s)
    return s


def fmt(v):
    if isinstance(v, dict) and set(v) == {"min", "max"}:
        lo, hi = fmt(v["min"]), fmt(v["max"])
        # A range is written with one precision for both ends (0.89–0.90, not 0.89–0.9).
        if all(re.fullmatch(r"-?\d+\.\d+", x) for x in (lo, hi)):
            places = max(len(x.split(".")[1]) for x in (lo, hi))
            lo, hi = (f"{float(x):.{places}f}" for x in (lo, hi))
        return f"{lo}–{hi}"
    if isinstance(v, list):
        return " / ".join("(" + ", ".join(fmt(y) for y in x) + ")" if isinstance(x, list) else fmt(x) for x in v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return fmt_num(v)
    return str(v)


def cell(v):
    return fmt(v).replace("|", "\\|").replace("\n", " ")


def anchor_id(slug, name):
    return slug + "-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def command_of(r):
    return r["command"], r.get("command_note")


def chunks(records):
    """Consecutive records with the same figure names, each rendered as one table."""
    out = []
    for r in records:
        if out and tuple(out[-1][0]["figures"]) == tuple(r["figures"]):
            out[-1].append(r)
        else:
            out.append([r])
    return out


def group_table(records, columns):
    """One table of records that share a date, a device and their figure names."""
    out = []
    commands = []
    for r in records:
        if command_of(r) not in commands:
            commands.append(command_of(r))
    shared = {}
    if len(records) > 1:
        for key in ("given", "note"):
            values = {r.get(key) for r in records}
            if len(values) == 1 and None not in values:
                shared[key] = values.pop()
    for key, label in (("given", "Given (not learned)"), ("note", "Note")):
        if key in shared:
            out += [f"{label}: {shared[key]}", ""]
    cols = [c for c in columns if c not in SPECIAL and any(c in r for r in records)]
    extra = []
    for r in records:
        for k in r:
            if k not in SPECIAL and k not in columns and k not in extra:
                extra.append(k)
    names = list(records[0]["figures"])
    wide = len(names) <= 12
    fig_cols = names if wide else ["figures"]
    has_given = "given" not in shared and any("given" in r for r in records)
    has_notes = extra or any("superseded_by" in r for r in records) or (
        "note" not in shared and any("note" in r for r in records))
    head = ["what"] + cols + fig_cols + (["given (not learned)"] if has_given else [])
    head += (["notes"] if has_notes else []) + ["cmd", "commit"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join("---" for _ in head) + "|")
    for r in records:
        row = [cell(r["what"])] + [cell(r[c]) if c in r else "" for c in cols]
        if wide:
            row += [cell(r["figures"][k]) for k in fig_cols]
        else:
            row.append("; ".join(f"{k}: {cell(v)}" for k, v in r["figures"].items()))
        if has_given:
            row.append(cell(r.get("given", "")))
        if has_notes:
            notes = [f"{k}: {cell(r[k])}" for k in extra if k in r]
            if "note" in r and "note" not in shared:
                notes.append(cell(r["note"]))
            if "superseded_by" in r:
                notes.append("superseded by " + cell(r["superseded_by"]))
            row.append("; ".join(notes))
        row.append(f"[{commands.index(command_of(r)) + 1}]")
        row.append(f"`{r['commit']}`")
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    for i, (cmd, note) in enumerate(commands, 1):
        out.append(f"{i}. `{cmd}`" + (f" — {note}" if note else ""))
    out.append("")
    return out


def by_date_device(records):
    groups = {}
    for r in records:
        groups.setdefault((r["date"], r["device"]), []).append(r)
    items = sorted(groups.items(), key=lambda kv: kv[0][1])
    return sorted(items, key=lambda kv: kv[0][0], reverse=True)


def render(index, data):
    out = [INTRO, "## Contents", ""]
    for slug, meta in index.items():
        out.append(f"- [{slug}](#{slug}): {meta['title']} ({len(data[slug])} measurements)")
    out.append("")
    for slug, meta in index.items():
        records = data[slug]
        out += [f"## {slug}", "", f"**{meta['title']}**", "", meta["description"], ""]
        if all("default" in r for r in records):
            names = []
            for r in records:
                if r["default"] not in names:
                    names.append(r["default"])
            for name in names:
                sub = [r for r in records if r["default"] == name]
                out += [f'<a id="{anchor_id(slug, name)}"></a>', f"**`{name}`** (`#{anchor_id(slug, name)}`)", ""]
                for (date, device), recs in by_date_device(sub):
                    out += [f"*{date} · {device}*", ""]
                    for chunk in chunks(recs):
                        out += group_table(chunk, meta["columns"])
        else:
            for (date, device), recs in by_date_device(records):
                out += [f"*{date} · {device}*", ""]
                for chunk in chunks(recs):
                    out += group_table(chunk, meta["columns"])
    text = "\n".join(out).rstrip("\n") + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/benchmarks.md is not what the data renders to")
    args = ap.parse_args()
    index, data = load()
    text = render(index, data)
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else None
        if current != text:
            fail("docs/benchmarks.md is not what docs/benchmarks/ renders to; run "
                 "`python3 scripts/render_benchmarks.py` and commit the result")
        print("docs/benchmarks.md is up to date")
        return
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({sum(len(v) for v in data.values())} measurements, {len(data)} sections)")


if __name__ == "__main__":
    main()
