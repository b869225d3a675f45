import math

import numpy as np

from ensemble.calibration import LambdaFit
from ensemble.report import write_report


def test_html_escapes_text_and_embeds_images(tmp_path):
    fit = LambdaFit(3.0, 0.2, (2.6, 3.4), -0.2, 0.05, False, 10, 100, 8.0, 8, 0.4, 1.0, t=1.0,
                    notes=("<script>alert(1)</script>",))
    sep = LambdaFit(math.inf, None, (40.0, math.inf), None, None, True, 10, 100, None, 9, None,
                    None, t=0.0)
    p = np.linspace(0, 1, 10)
    panels = [{"t": 0.0, "fit": sep, "posteriors": p, "proportions": (p > 0.5).astype(float)},
              {"t": 1.0, "fit": fit, "posteriors": p, "proportions": p}]
    paths = write_report(tmp_path, model="<b>evil</b>", fits=[sep, fit], joint=None,
                         panels=panels, recommendation=None, mode="sample")
    html = paths["html"].read_text()
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert "<b>evil</b>" not in html and "&lt;b&gt;evil" in html
    assert html.count("data:image/png;base64,") == 2 and "src=\"http" not in html
    assert (tmp_path / "report.md").exists() and (tmp_path / "qr_curves.png").stat().st_size > 1000


def test_report_renders_in_headless_chromium(tmp_path):
    """Render the HTML offline in Debian's chromium (apt-get install chromium) and screenshot it."""
    import shutil
    import subprocess

    import pytest

    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium not installed (apt-get install chromium) - render check skipped")
    fit = LambdaFit(3.0, 0.2, (2.6, 3.4), -0.2, 0.05, False, 10, 100, 8.0, 8, 0.4, 1.0, t=1.0)
    p = np.linspace(0, 1, 10)
    paths = write_report(tmp_path, model="sim", fits=[fit], joint=None,
                         panels=[{"t": 1.0, "fit": fit, "posteriors": p, "proportions": p}],
                         recommendation=None, mode="sample")
    shot = tmp_path / "shot.png"
    subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                    "--window-size=1200,1600", paths["html"].as_uri()],
                   capture_output=True, timeout=90)
    assert shot.exists() and shot.stat().st_size > 20_000  # a page with its images, not blank
