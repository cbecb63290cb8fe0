"""The roofline page of `warpsmith profile --html`, opened in headless Chromium: the screenshot shows
the plot (its frame, every ceiling's colour, the kernel's point where the SVG puts it), not a blank page.

Skips when no Chromium or Chrome binary is on PATH (``scripts/install_chromium.sh`` installs one from
the apt cache where it can). The screenshot stays in the test's ``tmp_path``; with
``WARPSMITH_TEST_ARTIFACTS=DIR`` it is also copied to DIR, and the test prints where it is.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from warpsmith.cli.main import cli
from warpsmith.profile.roofline import _COLORS, _PAD, ceilings
from warpsmith.targets import get_target

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
WINDOW = (1000, 1000)
FRAME = (0x99, 0x99, 0x99)  # the plot's frame (<rect stroke="#999">), lighter where a 1 px line straddles pixels
POINT = (64, 64, 64)  # a predicted point: #000 at fill-opacity 0.75 over white


def _browser() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def _hex(c: str) -> tuple[int, int, int]:
    return int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)


def _mask(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 6) -> np.ndarray:
    return (np.abs(img[..., :3].astype(int) - np.array(rgb)) <= tol).all(axis=-1)


def _frame(img: np.ndarray) -> np.ndarray:
    grey = img[..., :3].astype(int)
    return ((grey.max(axis=-1) - grey.min(axis=-1) <= 4) & (grey[..., 0] >= FRAME[0] - 6) & (grey[..., 0] <= 210))


def _longest_run(col: np.ndarray) -> tuple[int, int]:
    best, start = (0, -1), None
    for i, v in enumerate(list(col) + [False]):
        if v and start is None:
            start = i
        elif not v and start is not None:
            best, start = max(best, (start, i - 1), key=lambda r: r[1] - r[0]), None
    return best


def screenshot(browser: str, page, png, size=WINDOW) -> np.ndarray:
    """Render ``page`` in headless Chromium into ``png``; the pixels as an (H, W, 3+) uint8 array."""
    from PIL import Image

    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--force-device-scale-factor=1", f"--screenshot={png}", f"--window-size={size[0]},{size[1]}",
           page.resolve().as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert png.exists(), f"{browser} wrote no screenshot (exit {res.returncode}): {res.stderr[-2000:]}"
    return np.asarray(Image.open(png).convert("RGB"))


def test_the_html_roofline_renders_in_headless_chromium(tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip(f"no Chromium/Chrome binary on PATH (looked for {', '.join(BROWSERS)}); "
                    "scripts/install_chromium.sh installs one from the apt cache if it holds the packages")
    page = tmp_path / "roofline.html"
    res = CliRunner().invoke(cli, ["profile", "rms_norm", "--shape", "M=64,N=4096", "--dtype", "bfloat16",
                                   "--target", "h200", "--no-compile", "--html", str(page)])
    assert res.exit_code == 0, res.output
    html = page.read_text()
    png = tmp_path / "roofline.png"
    img = screenshot(browser, page, png)
    artifacts = os.environ.get("WARPSMITH_TEST_ARTIFACTS")
    if artifacts:
        os.makedirs(artifacts, exist_ok=True)
        png = shutil.copy(png, os.path.join(artifacts, "profile_roofline_chromium.png"))
    print(f"screenshot of the roofline page: {png}")

    # the frame: its long grey sides; its top-left corner is the SVG's (_PAD, _PAD), which places the SVG
    frame = _frame(img)
    cols = np.nonzero(frame.sum(axis=0) > 250)[0]
    assert len(cols) >= 2, "no plot frame on the screenshot (a blank or unstyled page?)"
    left, right = cols.min(), cols.max()
    top, bottom = _longest_run(frame[:, left])
    assert right - left > 500 and bottom - top > 250, (left, top, right, bottom)
    plot = img[top:bottom + 1, left:right + 1]
    # every ceiling is drawn in its colour inside the frame
    names = [c.name for c in ceilings(get_target("h200"), "bf16")]
    for i, name in enumerate(names):
        n = _mask(plot, _hex(_COLORS[i % len(_COLORS)]), tol=12).sum()
        assert n > 40, f"ceiling {name!r} ({_COLORS[i]}) has {n} pixels in the plot"
    # the kernel's point is where the SVG puts it, filled
    (cx, cy), = [(float(a), float(b)) for a, b in re.findall(r'<circle class="kernel"[^>]* cx="([\d.]+)" '
                                                               r'cy="([\d.]+)"', html)]
    x, y = round(left - _PAD + cx), round(top - _PAD + cy)
    disc = img[y - 2:y + 3, x - 2:x + 3]
    assert _mask(disc, POINT, tol=12).all(), f"no point at ({x}, {y}) on the screenshot: {disc[2, 2]}"


def test_a_page_without_the_plot_fails_the_check(tmp_path):
    """The check above can fail: the same page with its SVG removed has no frame and no point."""
    browser = _browser()
    if browser is None:
        pytest.skip(f"no Chromium/Chrome binary on PATH (looked for {', '.join(BROWSERS)})")
    page = tmp_path / "blank.html"
    page.write_text("<!DOCTYPE html><html><body><h1>rms_norm</h1><p>no plot here</p></body></html>")
    img = screenshot(browser, page, tmp_path / "blank.png", size=(800, 600))
    discs = np.lib.stride_tricks.sliding_window_view(_mask(img, POINT, tol=12), (5, 5)).all(axis=(-1, -2))
    assert not (_frame(img).sum(axis=0) > 250).any() and not discs.any()
