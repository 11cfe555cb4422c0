#!/usr/bin/env python3
"""Writes a `promtool test rules` file for alerts.yaml: a fleet of 50 sidecars in one workload
loses its Redis node, while 50 sidecars of another workload on another node go on.

Expected: one LockgateBackendDown (for the node) and one LockgateBackendUnavailable (for the
workload), not 50 of each, and nothing for the healthy workload. Usage (check-packaging.sh):

    deploy/prometheus/alerts-test.py > /tmp/alerts-test.yaml
    promtool test rules /tmp/alerts-test.yaml   # run beside alerts.yaml's copy
"""
import json
import sys

SIDECARS = 50
BROKEN = {"namespace": "shop", "job": "shop/checkout", "node": "redis-a:6379"}
HEALTHY = {"namespace": "billing", "job": "billing/invoices", "node": "redis-b:6379"}


def series(name, labels, values):
    text = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def fleet(workload, broken):
    out = []
    for pod in range(SIDECARS):
        target = {
            "namespace": workload["namespace"],
            "job": workload["job"],
            "instance": f"10.{len(workload['job'])}.0.{pod}:9380",
        }
        up_values = "1 1 0x30" if broken else "1x32"
        out.append(series("lockgate_backend_up", {**target, "node": workload["node"]}, up_values))
        # Each sidecar's app keeps trying: 5 acquires a minute, refused once Redis is gone.
        refused = "0 0 0+5x30" if broken else "0x32"
        acquired = "0+5x2 10x30" if broken else "0+5x32"
        for outcome, values in (("backend-unavailable", refused), ("acquired", acquired)):
            labels = {**target, "operation": "acquire", "kind": "lock", "outcome": outcome}
            out.append(series("lockgate_requests_total", labels, values))
        out.append(series("up", target, "1x32"))
    return out


def main():
    node = BROKEN["node"]
    workload = f"{BROKEN['namespace']}/{BROKEN['job']}"
    test = {
        "rule_files": ["alerts.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": fleet(BROKEN, True) + fleet(HEALTHY, False),
                "alert_rule_test": [
                    {
                        "eval_time": "15m",
                        "alertname": "LockgateBackendDown",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "critical", "node": node},
                                "exp_annotations": {
                                    "runbook_url": "docs/runbook.md#lockgatebackenddown",
                                    "summary": f"Redis {node} does not answer {SIDECARS} lockgate gateways",
                                    "description": "Lock calls that need this node answer 503 backend-unavailable with Retry-After. Check that Redis runs and is reachable from the gateway (redis-cli -h HOST -p PORT PING), and the gateway's log.",
                                },
                            }
                        ],
                    },
                    {
                        "eval_time": "15m",
                        "alertname": "LockgateBackendUnavailable",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "critical",
                                    "namespace": BROKEN["namespace"],
                                    "job": BROKEN["job"],
                                },
                                "exp_annotations": {
                                    "runbook_url": "docs/runbook.md#lockgatebackendunavailable",
                                    "summary": f"lockgate gateways of {workload} cannot reach their Redis",
                                    "description": "Lock requests answer 503 backend-unavailable. LockgateBackendDown names the node; check Redis, the network and the gateways' --redis-* settings.",
                                },
                            }
                        ],
                    },
                    {"eval_time": "15m", "alertname": "LockgateTargetDown", "exp_alerts": []},
                ],
            }
        ],
    }
    # JSON is YAML: promtool reads it as written.
    json.dump(test, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
