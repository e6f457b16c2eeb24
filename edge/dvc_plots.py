"""DVC's plots, rendered where there is no network (``edge plots``)."""

from __future__ import annotations

import json
from pathlib import Path


def dvc_plots_offline(repo: Path, out: Path) -> Path:
    """``dvc plots show``'s charts as one HTML page that needs no network: DVC's own Vega-Lite specs
    (``dvc plots show --json``) drawn to SVG by vl-convert (Vega bundled in the wheel), and the image
    plots embedded. DVC's HTML loads Vega from a CDN, so offline it shows nothing interactive."""
    import base64
    import html
    import subprocess
    import sys

    import vl_convert

    dvc = Path(sys.executable).with_name("dvc")
    shown = subprocess.run([str(dvc), "plots", "show", "--json"], cwd=repo, capture_output=True, text=True)
    if shown.returncode != 0:
        raise RuntimeError(f"dvc plots show failed in {repo}: {shown.stderr.strip()[-500:]}")
    data = json.loads(shown.stdout)
    errors = data.get("errors") or []
    parts = [f"<h1>DVC plots of {html.escape(str(Path(repo).resolve().name))}</h1>"]
    for error in errors:
        parts.append(f"<p><b>{html.escape(error.get('name', ''))}</b>: {html.escape(error.get('msg', ''))}</p>")
    for name, items in data.get("data", {}).items():
        parts.append(f"<h2>{html.escape(name)}</h2>")
        for item in items:
            if item["type"] == "vega":
                parts.append(vl_convert.vegalite_to_svg(item["content"]))
            elif item["type"] == "image":
                encoded = base64.b64encode(Path(item["url"]).read_bytes()).decode()
                parts.append(f'<img alt="{html.escape(name)}" src="data:image/png;base64,{encoded}">')
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><title>DVC plots</title></head><body>"
                   + "\n".join(parts) + "</body></html>\n")
    return out
