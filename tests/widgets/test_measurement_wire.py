"""A Measurement crosses to the page in its one encoding, and the page's hover text follows the contract.

The hover text is the real ``measurementTitle`` of js/measure/measure.ts, bundled with esbuild against the
TypeScript that ``mlc_lab.core.model_ts`` generates and run in node; the measurement goes through the
explorer's real packer. Nothing on the TypeScript side is edited by hand for a new field.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import field, make_dataclass
from pathlib import Path

from mlc_lab.core import model_ts
from mlc_lab.model.measure import Measurement, hover
from mlc_lab.widgets.explorer_text import measurement_info

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "measurement_unsteady.json"

# A measurement whose repeats spread 25% of their median, the steadiest of 3 rounds: measure says
# "unsteady" (mlc_lab.model.measure.quiet) and so must the page.
UNSTEADY = Measurement(
    latency_s=2e-3,
    std_s=3e-4,
    min_s=1.8e-3,
    max_s=2.9e-3,
    repeats=10,
    iqr_s=5e-4,
    rounds=3,
    results_s=[2e-3] * 10,
    flops=4.2e6,
    gflops=2.1,
    max_abs_error=0.0,
    correct=True,
    target='{"kind":"llvm","mcpu":"znver4"}',
    threads=2,
    others_cores=0.02,
    build_s=0.125,
    where="10.0.0.7:9090",  # timed on a class machine (every field the page shows on hover is set)
)

_BUNDLE = r"""
const esbuild = require("esbuild");
const [entry, model, out] = process.argv.slice(1);
esbuild.build({
  entryPoints: [entry], outfile: out, bundle: true, format: "esm", platform: "node", logLevel: "error",
  plugins: [{ name: "contract", setup(b) { b.onResolve({ filter: /^\.\.\/lib\/model$/ }, () => ({ path: model })); } }],
}).catch((e) => { console.error(e); process.exit(1); });
"""


def hover_text(packed: dict, model_text: str, tmp: Path) -> str:
    """measurementTitle(packed) of js/measure/measure.ts, built against ``model_text`` as js/lib/model.ts."""
    (tmp / "model.ts").write_text(model_text)
    (tmp / "m.json").write_text(json.dumps(packed))
    (tmp / "entry.ts").write_text(
        f'import {{ measurementTitle }} from "{ROOT / "js" / "measure" / "measure.ts"}";\n'
        'import m from "./m.json";\n'
        "console.log(JSON.stringify(measurementTitle(m as never)));\n"
    )
    subprocess.run(
        ["node", "-e", _BUNDLE, str(tmp / "entry.ts"), str(tmp / "model.ts"), str(tmp / "out.mjs")],
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    done = subprocess.run(["node", str(tmp / "out.mjs")], capture_output=True, text=True, check=True, timeout=60)
    return json.loads(done.stdout)


def test_the_spread_and_the_rounds_reach_the_page_and_it_says_unsteady(tmp_path):
    packed = measurement_info(UNSTEADY)
    assert packed["iqr_s"] == 5e-4 and packed["rounds"] == 3  # the old packer's 22 names left both out
    assert packed["target"] == "cpu"
    assert UNSTEADY.quiet is False  # measure's own rule: the repeats spread more than STEADY_SPREAD
    # the fixture js/__tests__/explorer_measure.test.ts feeds the page is what the packer sends
    assert json.loads(FIXTURE.read_text()) == packed, "stale fixture: write measurement_info(UNSTEADY) to it"
    text = hover_text(packed, model_ts.TARGET.read_text(), tmp_path)
    assert "unsteady: the repeats spread 25% of their median, the steadiest of 3 rounds" in text
    assert "build: 125 ms" in text  # build_s is declared shown on hover in the contract


def test_a_field_added_to_measurement_reaches_the_hover_text_with_no_hand_edit(tmp_path):
    """Add a field to Measurement (a variant dataclass), declared shown on hover: regenerate the
    TypeScript from the variant, and the real packer and the real hover code carry it to the text."""
    variant = make_dataclass(
        "Measurement",
        [("die_temp_c", float | None, field(default=None, metadata=hover("die temperature", "°C")))],
        bases=(Measurement,),
    )
    m = variant(latency_s=1e-3, repeats=5, target="cpu", die_temp_c=71.5)
    packed = measurement_info(m)
    assert packed["die_temp_c"] == 71.5
    generated = model_ts.render({**model_ts.contract(), "Measurement": variant})
    assert "  die_temp_c: number | null;" in generated
    assert '{"field": "die_temp_c", "label": "die temperature", "unit": "\\u00b0C"}' in generated
    assert "die temperature: 71.5 °C" in hover_text(packed, generated, tmp_path)
    # and the file in the tree does not have it: the text came from the variant's contract alone
    assert "die_temp_c" not in model_ts.TARGET.read_text()
    assert "die temperature" not in hover_text(
        measurement_info(Measurement(latency_s=1e-3)), model_ts.TARGET.read_text(), tmp_path
    )
