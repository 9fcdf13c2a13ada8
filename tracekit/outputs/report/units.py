"""Numbers as a reader wants them: µs with separators, binary byte units, ×, short kernel names."""

import pandas as pd

from tracekit.analysis.kernel_names import short_kernel_names

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
# Kernel names carry their template arguments and parameters; a chart label shows the function.
SHORT_KERNEL_CHARS = 48


def missing(value):
    return value is None or bool(pd.isna(value))


def number(value, digits=1):
    """1234.56 → '1,234.6'; whole numbers lose their decimals ('5', not '5.0')."""
    if missing(value):
        return "—"
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def us(value):
    return f"{number(value)} µs"


def ms(value):
    """Milliseconds with three significant figures at least: '869.3 ms', '0.060 ms'."""
    if missing(value):
        return "—"
    value = float(value)
    if abs(value) >= 100:
        return f"{value:,.1f} ms"
    if abs(value) >= 1:
        return f"{value:.2f} ms"
    return f"{value:.3f} ms"


def bytes_text(value):
    """536870912 → '512 MiB', 140 → '140 B', 2684354560 → '2.5 GiB'."""
    if missing(value):
        return "—"
    value, unit = float(value), 0
    while abs(value) >= 1024 and unit < len(_BYTE_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    text = f"{value:.0f}" if value.is_integer() or unit == 0 else f"{value:.1f}"
    return f"{text} {_BYTE_UNITS[unit]}"


def times(value):
    """A speed-up: '22.6×' at 10 and above, '1.13×' below."""
    if missing(value):
        return "—"
    value = float(value)
    if value >= 100:
        return f"{value:,.0f}×"
    return f"{value:.1f}×" if value >= 10 else f"{value:.2f}×"


def pct(value):
    if missing(value):
        return "—"
    return f"{float(value):.0f}%"


def occupancy(value):
    """An occupancy as the low_occupancy finding writes it: '18.8%' (one decimal), '—' unknown."""
    if missing(value):
        return "—"
    return f"{float(value):.1f}%"


def per_step(value):
    """A count per step: '1', '20,300', or '1.2' when the steps differ."""
    if missing(value):
        return "—"
    value = float(value)
    return f"{int(value):,}" if value.is_integer() else f"{value:,.1f}"


def short_kernel(name):
    """'void pytorch_flash::flash_fwd_kernel<...>(...)' → 'pytorch_flash::flash_fwd_kernel', as a
    table fitted to a terminal shortens it (tracekit.analysis.kernel_names.short_kernel_names)."""
    if missing(name):
        return "—"
    return short_kernel_names([name], SHORT_KERNEL_CHARS)[str(name)]
