"""A tiny inline-SVG chart helper for report.html: line charts (linear or log axes) and grouped
bar charts. No dependencies; the output is an <svg> element to paste into HTML."""
import html
import math

WIDTH, HEIGHT = 520, 290
MARGIN = {"l": 62, "r": 14, "t": 30, "b": 58}


def esc(text):
    return html.escape(str(text), quote=True)


def num(v):
    """Compact number for tick labels: 1.5k, 20M, 0.25."""
    if v == 0:
        return "0"
    a = abs(v)
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.3g}"


def nice_ticks(lo, hi, n=5):
    """About n round ticks (1, 2, 5 x 10^k steps) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 12))
    return ticks


def log_ticks(lo, hi):
    """Powers of ten covering [lo, hi] (lo > 0), with 2 and 5 in between over narrow ranges."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if b == a:
        b += 1
    mults = (1, 2, 5) if b - a <= 2 else (1,)
    return [m * 10.0 ** e for e in range(a, b + 1) for m in mults
            if 10.0 ** a <= m * 10.0 ** e <= 10.0 ** b]


class _Axes:
    """Maps data to pixels for one axis (linear or log10)."""

    def __init__(self, lo, hi, log, p0, p1, nticks):
        if log:
            lo = max(lo, 1e-12)
            hi = max(hi, lo * 10)
            self.ticks = log_ticks(lo, hi)
        else:
            self.ticks = nice_ticks(lo, hi, nticks)
        self.lo, self.hi = self.ticks[0], self.ticks[-1]
        self.log, self.p0, self.p1 = log, p0, p1

    def _t(self, v):
        return math.log10(max(v, 1e-12)) if self.log else v

    def __call__(self, v):
        span = self._t(self.hi) - self._t(self.lo) or 1
        return self.p0 + (self._t(v) - self._t(self.lo)) / span * (self.p1 - self.p0)


def _frame(title, width, height, body):
    return (f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'role="img" aria-label="{esc(title)}">'
            f'<text class="title" x="{width / 2}" y="18" text-anchor="middle">{esc(title)}</text>'
            + "".join(body) + "</svg>")


def _legend(items, width, height):
    """One row of swatches along the bottom edge."""
    out, x = [], MARGIN["l"]
    for label, color in items:
        out.append(f'<rect x="{x}" y="{height - 15}" width="10" height="10" fill="{color}"/>'
                   f'<text class="legend" x="{x + 14}" y="{height - 6}">{esc(label)}</text>')
        x += 24 + 7 * len(str(label))
    return out


def _axis_lines(xa, ya, xfmt, yfmt, xlabel, ylabel, width, height):
    out, x0, x1 = [], MARGIN["l"], width - MARGIN["r"]
    for t in ya.ticks:
        y = ya(t)
        out.append(f'<line class="grid" x1="{x0}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="tick" x="{x0 - 5}" y="{y + 3:.1f}" '
                   f'text-anchor="end">{esc(yfmt(t))}</text>')
    if xa is not None:
        for t in xa.ticks:
            x = xa(t)
            out.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{ya.p1:.1f}" '
                       f'y2="{ya.p0:.1f}"/><text class="tick" x="{x:.1f}" y="{ya.p0 + 14:.1f}" '
                       f'text-anchor="middle">{esc(xfmt(t))}</text>')
    out.append(f'<text class="label" x="{(x0 + x1) / 2:.1f}" '
               f'y="{height - 24}" text-anchor="middle">{esc(xlabel)}</text>'
               f'<text class="label" transform="translate(13,'
               f'{(height - MARGIN["b"] + MARGIN["t"]) / 2:.1f}) '
               f'rotate(-90)" text-anchor="middle">{esc(ylabel)}</text>')
    return out


class Chart:
    """A line chart. Add series with line(), optional vertical markers with vline(), then svg()."""

    def __init__(self, title, xlabel="", ylabel="", xlog=False, ylog=False, xfmt=num, yfmt=num,
                 ymin=None, ymax=None, xmin=None, width=WIDTH, height=HEIGHT):
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.xlog, self.ylog, self.xfmt, self.yfmt = xlog, ylog, xfmt, yfmt
        self.ymin, self.ymax, self.xmin = ymin, ymax, xmin
        self.width, self.height = width, height
        self.series, self.vlines = [], []

    def line(self, label, color, points, dashed=False):
        pts = [(float(x), float(y)) for x, y in points
               if x is not None and y is not None
               and (not self.xlog or x > 0) and (not self.ylog or y > 0)]
        if pts:
            self.series.append((label, color, pts, dashed))
        return self

    def vline(self, x, color, text=""):
        self.vlines.append((float(x), color, text))
        return self

    def svg(self):
        w, h = self.width, self.height
        if not self.series:
            return _frame(self.title, w, h, [f'<text class="empty" x="{w / 2}" y="{h / 2}" '
                                             'text-anchor="middle">no data</text>'])
        xs = [x for _, _, pts, _ in self.series for x, _ in pts] + [v[0] for v in self.vlines]
        ys = [y for _, _, pts, _ in self.series for _, y in pts]
        xlo = self.xmin if self.xmin is not None else min(xs)
        ylo = self.ymin if self.ymin is not None else (min(ys) if self.ylog else min(0, min(ys)))
        yhi = self.ymax if self.ymax is not None else max(ys) * (1 if self.ylog else 1.05)
        xa = _Axes(xlo, max(xs), self.xlog, MARGIN["l"], w - MARGIN["r"], 6)
        ya = _Axes(ylo, yhi, self.ylog, h - MARGIN["b"], MARGIN["t"], 5)
        body = _axis_lines(xa, ya, self.xfmt, self.yfmt, self.xlabel, self.ylabel, w, h)
        for x, color, text in self.vlines:
            px = xa(x)
            body.append(f'<line class="marker" x1="{px:.1f}" x2="{px:.1f}" y1="{ya.p1}" '
                        f'y2="{ya.p0}" stroke="{color}"><title>{esc(text)}</title></line>')
        for label, color, pts, dashed in self.series:
            d = " ".join(f"{xa(x):.1f},{ya(y):.1f}" for x, y in pts)
            dash = ' stroke-dasharray="5,3"' if dashed else ""
            body.append(f'<polyline class="series" fill="none" points="{d}" stroke="{color}"{dash}>'
                        f'<title>{esc(label)}</title></polyline>')
        body += _legend([(s[0], s[1]) for s in self.series], w, h)
        return _frame(self.title, w, h, body)


def bar_chart(title, categories, series, ylabel="", ylog=False, yfmt=num, width=WIDTH,
              height=HEIGHT):
    """Grouped bars: one group per category, one bar per (label, color, values) series, each bar
    labelled with its value. With ylog, zero values draw no bar (their label still shows 0)."""
    values = [v for _, _, vals in series for v in vals if v is not None]
    positive = [v for v in values if v > 0]
    if not categories or not positive:
        return _frame(title, width, height, [
            f'<text class="empty" x="{width / 2}" y="{height / 2}" '
            'text-anchor="middle">no data</text>'])
    ya = _Axes(min(positive) / 2 if ylog else 0, max(positive) * 1.15, ylog,
               height - MARGIN["b"], MARGIN["t"], 5)
    body = _axis_lines(None, ya, num, yfmt, "", ylabel, width, height)
    plot_w = width - MARGIN["l"] - MARGIN["r"]
    group_w = plot_w / len(categories)
    bar_w = group_w * 0.8 / len(series)
    for i, cat in enumerate(categories):
        gx = MARGIN["l"] + i * group_w
        body.append(f'<text class="tick" x="{gx + group_w / 2:.1f}" y="{ya.p0 + 14:.1f}" '
                    f'text-anchor="middle">{esc(cat)}</text>')
        for j, (label, color, vals) in enumerate(series):
            v = vals[i] if i < len(vals) else None
            if v is None:
                continue
            x = gx + group_w * 0.1 + j * bar_w
            top = ya(v) if v > 0 else ya.p0
            if v > 0:
                body.append(f'<rect x="{x:.1f}" y="{top:.1f}" width="{bar_w * 0.92:.1f}" '
                            f'height="{ya.p0 - top:.1f}" fill="{color}"><title>{esc(label)} '
                            f'{esc(cat)}: {v:g}</title></rect>')
            body.append(f'<text class="value" x="{x + bar_w * 0.46:.1f}" y="{top - 3:.1f}" '
                        f'text-anchor="middle">{esc(yfmt(v))}</text>')
    body += _legend([(s[0], s[1]) for s in series], width, height)
    return _frame(title, width, height, body)


CSS = """
svg.chart { background: #fff; border: 1px solid #ddd; margin: 4px; font: 11px sans-serif; }
svg.chart .title { font-weight: bold; font-size: 13px; }
svg.chart .grid { stroke: #eee; }
svg.chart .tick, svg.chart .value { fill: #555; font-size: 10px; }
svg.chart .label, svg.chart .legend { fill: #333; }
svg.chart .series { fill: none; stroke-width: 1.8; }
svg.chart .marker { stroke-dasharray: 2,3; stroke-width: 1; opacity: 0.6; }
svg.chart .empty { fill: #999; }
"""
