"""Run checkov's Kubernetes checks over a folder of manifests; print the results as one JSON document.

Runs under checkov's own interpreter (`make checkov` builds `.venv-checkov`: checkov pins boto3 and
packaging versions that the project's environment cannot take), so it imports checkov only. The
runner is called directly, not through the CLI, which spends seconds on its integrations at exit.
"""

from __future__ import annotations

import json
import os
import sys

from checkov.kubernetes.runner import Runner
from checkov.runner_filter import RunnerFilter


def main(folder: str) -> None:
    report = Runner().run(root_folder=folder, runner_filter=RunnerFilter(framework=["kubernetes"]))
    out = {
        "failed": [[r.check_id, r.check_name, r.resource, r.file_path] for r in report.failed_checks],
        "skipped": [
            [r.check_id, r.resource, (r.check_result or {}).get("suppress_comment", "")]
            for r in report.skipped_checks
        ],
        "passed": [[r.check_id, r.resource] for r in report.passed_checks],
        "parsing_errors": list(report.parsing_errors),
        "resources": sorted(report.resources),
    }
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)  # checkov's background workers would hold the process for seconds after the scan


if __name__ == "__main__":
    main(sys.argv[1])
