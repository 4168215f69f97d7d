"""The lab's progress on stderr, one line (the core package does not depend on tqdm).

On a terminal the line is rewritten in place at most every `interval` seconds; elsewhere (CI
logs, a pipe) a line is printed when each stage starts, so the log stays readable.
"""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: float, stream=None, interval: float = 0.2):
        self.total = max(total, 1e-9)
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.done = 0.0
        self.started = time.monotonic()
        self._shown_at = 0.0
        self._stage = None
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, stage: str, advance: float = 0.0, detail: str = "") -> None:
        """`advance` units of work done in `stage` (e.g. "lm / rope: training"), `detail` its state."""
        self.done += advance
        now = time.monotonic()
        if self._tty:
            if now - self._shown_at >= self.interval or stage != self._stage:
                self._shown_at = now
                self.stream.write("\r\x1b[2K" + self._line(stage, detail, now))
                self.stream.flush()
        elif stage != self._stage:
            self.stream.write(self._line(stage, detail, now) + "\n")
            self.stream.flush()
        self._stage = stage

    def _line(self, stage: str, detail: str, now: float) -> str:
        fraction = min(self.done / self.total, 1.0)
        filled = int(fraction * 20)
        elapsed = int(now - self.started)
        return (f"posenc lab [{'#' * filled}{'.' * (20 - filled)}] {fraction:4.0%} {elapsed // 60}:{elapsed % 60:02d} "
                f"{stage}{' · ' + detail if detail else ''}")

    def close(self) -> None:
        """The last line: everything done, and how long it took."""
        self.done = self.total
        self.stream.write(("\r\x1b[2K" if self._tty else "") + self._line("done", "", time.monotonic()) + "\n")
        self.stream.flush()
