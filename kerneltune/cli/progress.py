"""Rich progress for a sweep: candidates done/total, ETA, best so far, failures by kind. The engine reports
events (``tuning.sweep.Observer``); this renders them."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from kerneltune.files.records import Entry, Record
from kerneltune.files.safe_io import visible
from kerneltune.seams.wire import Status


class RichObserver:
    def __init__(self, console: Console):
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.fields[bucket]}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            TextColumn("{task.fields[best]}"), TextColumn("[red]{task.fields[fails]}"),
            console=console, transient=False,
        )
        self.task: Any = None

    def __enter__(self) -> RichObserver:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def on_prior(self, bucket: str, lines: list[str]) -> None:
        from rich.markup import escape

        for text in lines:  # printed above the bar, so they lead the bucket's output
            self.console.print(f"[yellow]{escape(text)}", highlight=False, soft_wrap=True)

    def on_bucket_start(self, bucket: str, total: int, done: int) -> None:
        # The bucket's name comes from a file: shown, never obeyed (markup, escape sequences).
        self.task = self.progress.add_task("", total=total, completed=done, bucket=escape(visible(bucket)), best="",
                                           fails="")
        self._best: float | None = None
        self._unit = "µs"

    def on_record(self, bucket: str, record: Record, failures: Counter) -> None:
        if record.status == Status.OK:
            t = record.value
            self._unit = "µs" if record.timing is not None else "µs (modelled)"
            if t is not None and (self._best is None or t < self._best):
                self._best = t
        fails = " ".join(f"{k}:{v}" for k, v in sorted(failures.items()) if k != Status.CONSTRAINT and v)
        best = f"best {self._best:.1f} {self._unit}" if self._best is not None else ""
        if record.status != Status.CONSTRAINT:
            self.progress.update(self.task, advance=1, best=best, fails=fails)

    def on_bucket_end(self, bucket: str, entry: Entry | None) -> None:
        self.progress.update(self.task, completed=self.progress.tasks[self.task].total)
