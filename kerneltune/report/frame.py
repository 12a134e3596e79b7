"""Journals to one pandas frame, one row per candidate, with the written column schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from kerneltune.files.records import Entry
from kerneltune.files.trust import warn_if_not_yours
from kerneltune.tables.stamps import device_kind
from kerneltune.tuning.journal import Journal

# The frame's fixed columns, in order (the report's CSV adds ``rank`` after the bucket and leaves out an empty
# ``score``: ``ranking.ranked``); stamp_* columns follow (the stamps each record's backend matches tables on: driver
# and CUDA for a GPU through JAX, torch and Triton for one through torch, ...), then problem_* and config_* columns,
# one per field.
SCHEMA = (
    "kernel", "run", "bucket", "strategy", "status", "invalidity", "error", "median_us", "spread", "samples",
    "score", "tflops", "pct_ceiling", "device", "device_kind", "kernel_hash", "time",
    "journal",
)
# The CSV's precision per column: a tenth of a percent of a time, of a rate, of a spread is below the noise.
CSV_DECIMALS = {"median_us": 2, "spread": 4, "score": 1, "tflops": 4, "pct_ceiling": 1}
FAILURE_STATUSES = {"constraint", "compile", "runtime", "timeout", "correctness", "unsupported"}
# A journal's status as the report words it: "pruned" is a candidate stopped early by the racing rule (its median
# from one batch, already 1.5x the best), "constraint" one the kernel refused before it compiled.
STATUS_WORDS = {"pruned": "stopped early", "constraint": "refused"}


def journal_files(results: Path) -> list[Path]:
    if results.is_file():
        return [results]
    files = sorted(p for p in results.rglob("*.jsonl") if ".optuna" not in p.name)
    if not files:
        raise FileNotFoundError(f"report: no journal (*.jsonl) under {results}")
    return files


def run_of(journal: Path, results: Path) -> str:
    """The run a journal belongs to: its folder under the results root, without a trailing ``journals``."""
    root = results.parent if results.is_file() else results
    folder = journal.parent.parent if journal.parent.name == "journals" else journal.parent
    try:
        rel = folder.relative_to(root)
    except ValueError:
        rel = Path(folder.name)
    return str(Path(root.name) / rel) if str(rel) != "." else root.name


def load_frame(results: Path) -> pd.DataFrame:
    rows = []
    for path in journal_files(results):
        warn_if_not_yours(path, "report: the journal")
        run = run_of(path, results)
        for r in Journal(path).records():
            s = r.stamped
            status = str(r.status)
            row = {
                "kernel": r.kernel, "run": run, "bucket": r.bucket, "strategy": r.strategy,
                "status": STATUS_WORDS.get(status, status),
                "invalidity": STATUS_WORDS.get(status, status) if status in FAILURE_STATUSES else "",
                "error": (r.error or "").replace("\n", " ")[:500],
                "median_us": r.median_us, "spread": r.spread, "samples": r.samples, "score": r.score,
                "tflops": r.tflops, "pct_ceiling": r.pct_of_ceiling(), "device": record_device(s),
                "device_kind": s.get("device_kind") or device_kind(str(record_device(s))),
                "kernel_hash": r.kernel_hash, "time": r.time, "journal": str(path),
            }
            row.update({f"stamp_{k}": s.get(k) for k in s.get("matched") or () if k not in ("device", "kernel_hash")})
            row.update({f"problem_{k}": v for k, v in (r.problem or {}).items()})
            row.update({f"config_{k}": v for k, v in r.config.items()})
            # The check's own figures: a Triton autotuner checked against its first config says so here
            # (accuracy_error_vs_first_config), the weaker check it is.
            row.update({f"accuracy_{k}": v for k, v in (r.accuracy or {}).items()})
            rows.append(row)
    if not rows:  # a journal of another encoding, another tool's file, or only its torn last line
        raise ValueError(f"report: no record in {', '.join(str(p) for p in journal_files(results))} (each line that "
                         f"is not one is named above)")
    frame = pd.DataFrame(rows)
    extra = [c for prefix in ("stamp_", "problem_", "config_", "accuracy_") for c in sorted(frame.columns)
             if c.startswith(prefix)]
    frame = frame.reindex(columns=list(SCHEMA) + extra)
    for c in frame.columns:  # a field the journals hold as integers stays integer where some rows lack it
        if _all_ints(r.get(c) for r in rows):
            frame[c] = frame[c].astype("Int64")
    return frame


def record_device(stamps: dict[str, Any]) -> str | None:
    """The device a record was measured on, by name: the backend's ``device`` stamp (a GPU or a CPU model),
    or ``gpu`` in records from before every backend stamped one."""
    return stamps.get("device") or stamps.get("gpu")


def row_config(row: Any, config_cols: list[str]) -> dict[str, Any]:
    """A frame row's config: its ``config_*`` columns without the prefix, the empty ones left out."""
    return {c[len("config_"):]: row[c] for c in config_cols if pd.notna(row[c])}


def _all_ints(values: Any) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(type(v) is int for v in present)


# A spreadsheet runs a cell that begins with one of these as a formula (CSV injection, OWASP): a journal's error
# text or a bucket's name could. Such a text cell is written with a leading apostrophe, read as text.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _as_text(value: Any) -> Any:
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_START) else value


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """One CSV row per candidate, measured floats rounded to what the measurement resolves, no text cell a
    spreadsheet would run as a formula; the folder made as needed. Written whole or not at all, in UTF-8
    (``safe_io.atomic_writer``): a kill or a full disk leaves the previous CSV as it was."""
    from kerneltune.files.paths import make_folder
    from kerneltune.files.safe_io import atomic_writer

    make_folder(path.parent)
    out = frame.round({c: d for c, d in CSV_DECIMALS.items() if c in frame})
    for column in out.select_dtypes(include=["object", "string"]).columns:
        out[column] = out[column].map(_as_text)
    with atomic_writer(path) as f:
        out.to_csv(f, index=False)


def load_baseline(path: Path, frame: pd.DataFrame) -> dict[str, Entry]:
    """bucket name -> table entry, from one table file or every table under a folder; a file that is not a
    tuned table (or no regular file, or over ``MAX_TABLE_BYTES``, or JSON past ``safe_io``'s bounds), a table of
    another kernel or device than the journals', or an entry whose time is no positive finite number (the report
    would call a NaN or zero baseline "faster") is an error naming it."""
    from kerneltune.files.records import finite, positive_time
    from kerneltune.files.safe_io import MAX_TABLE_BYTES, BadJson, brief, loads_bounded_json, read_regular_bytes
    from kerneltune.files.trust import why_untrusted

    files = [path] if path.is_file() else sorted(path.rglob("*.json"))
    if not files:
        raise FileNotFoundError(f"--baseline {path}: no tuned table (*.json) there")
    kernels = {str(k) for k in frame["kernel"].dropna().unique()}
    kinds = {str(d) for d in frame["device_kind"].dropna().unique()}
    out: dict[str, Entry] = {}
    for f in files:
        try:
            text = read_regular_bytes(f, MAX_TABLE_BYTES, "tuned table").decode("utf-8")
            if (why := why_untrusted(f)) is not None:  # a baseline another user could write decides "faster"
                raise ValueError(f"--baseline {f}: {why}; not used (the guide's trust page says why)")
            table = loads_bounded_json(text, f"--baseline {f}")
            entries = table["entries"].items()
        except OSError as e:  # a FIFO, a device, a folder, too big, unreadable: as the system or safe_io words it
            raise ValueError(f"--baseline {f}: {e.strerror or e}") from None
        except BadJson as e:
            raise ValueError(f"--baseline {f}: not a tuned table ({e.why})") from None
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"--baseline {f}: not a tuned table ({type(e).__name__}: {e})") from None
        except ValueError as e:
            if str(e).startswith("--baseline"):
                raise
            raise ValueError(f"--baseline {f}: not a tuned table ({type(e).__name__}: {e})") from None
        if not isinstance(table.get("kernel"), str) or table["kernel"] not in kernels:
            raise ValueError(f"--baseline {f}: a table of kernel {brief(table.get('kernel'))}, the journals are of "
                             f"{', '.join(sorted(kernels)) or 'no kernel'}")
        if kinds and (not isinstance(table.get("device_kind"), str) or table["device_kind"] not in kinds):
            raise ValueError(f"--baseline {f}: a table for {brief(table.get('device_kind'))}, the journals were "
                             f"measured on {', '.join(sorted(kinds))}")
        for key, raw in entries:
            name = f"--baseline {f}: entry {brief(key)}"
            e = Entry.build(raw) if isinstance(raw, dict) else None
            if e is None or not (isinstance(e.bucket_name, str) or (e.bucket_name is None and e.bucket)):
                raise ValueError(f"{name}: not an entry (no bucket_name or bucket)")
            if not positive_time(e.median_us):
                raise ValueError(f"{name}: median_us {brief(e.median_us)} is not a positive finite time")
            if e.spread is not None and not (finite(e.spread) and e.spread >= 0):
                raise ValueError(f"{name}: spread {brief(e.spread)} is not a finite number at or above 0")
            out[e.bucket_name if e.bucket_name is not None else json.dumps(dict(e.bucket), sort_keys=True)] = e
    return out
