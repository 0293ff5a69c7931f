"""`make neuron-chart`: the Neuron chart values llmctl sets against a pulled chart's values.yaml.

Usage: neuron_chart_check.py CHART_DIR (the untarred chart: Chart.yaml, values.yaml). Prints the
chart version and every key path llmctl sets that the chart lacks; exit 1 when there is one."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_helm_values import unknown_keys

from llmctl.blueprints.versions import versions
from llmctl.infra.platform.neuron import neuron_values


def main(chart_dir: Path) -> int:
    chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    defaults = yaml.safe_load((chart_dir / "values.yaml").read_text())
    ours = neuron_values(versions().eks.kubernetes_version.value)
    problems = unknown_keys(ours, defaults)
    print(
        f"neuron-helm-chart {chart.get('version')}: "
        + ("; ".join(problems) or "every key llmctl sets exists")
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
