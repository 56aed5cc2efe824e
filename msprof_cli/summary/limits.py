"""The default thresholds of `msprof check` (docs/summary.md), apart from the gate itself:
the CLI builds the `--max-*` options from them at start-up, without importing the summary
model (every `msprof` command loads the CLI)."""
from __future__ import annotations

DEFAULTS: dict[str, str] = {
    "device-time": "+1%,+0.5us",
    "fp-bp": "+1%,+0.5us",
    "refresh": "off",
    "op-time": "+1%,+0.5us",
    "communication": "+5%,+1us",
    "memcpy": "+5%,+1us",
    "op-type": "+5%,+1us",
    "iteration-time": "+30%,+1ms",
    "iteration-time-p90": "off",
    "data-aug-bound": "+100%,+1ms",
    # the tasks outside models (eager metrics, dataset queries, callbacks): which of them run
    # depends on the script's threads, so every number of theirs is judged as host-side
    "outside-models": "+100%,+1ms",
    # the predicted device memory peak (deterministic, like the device side): "fit" = it
    # must fit the chip; a growth against the baseline; a size alone = a ceiling
    "peak-memory": "fit,+1%,+1MiB",
}
