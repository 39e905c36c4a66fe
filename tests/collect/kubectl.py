"""A stand-in for kubectl, for tests/collect/faults.sh's kubernetes scenario: two pods,
a (of the Deployment front) and b (behind the Service back), that are the network
namespaces PREFIX-a and PREFIX-b. Answers the calls `blackbox collect --kubernetes`
makes: `get pods` by selector, `get pods,services,endpointslices` (b's address held by
another pod, b-2, from the second such call on, as after a restart), and `exec -i`
into a pod, run in its namespace. Every call is logged to CALLS.

Usage: kubectl.py PREFIX ADDRESS_A ADDRESS_B CALLS ARGS...
"""
import json
import os
import sys

prefix, address_a, address_b, calls = sys.argv[1:5]
args = sys.argv[5:]
with open(calls, "a") as log:
    log.write(" ".join(args) + "\n")


def pod(name, ip, labels, owner):
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "demo", "labels": labels,
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": owner}]},
        "spec": {"nodeName": "node-1"},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]},
    }


def pods(b_name):
    return [
        pod("a", address_a, {"tier": "demo", "app": "front", "pod-template-hash": "5c8d7f9b4"},
            "front-5c8d7f9b4"),
        pod(b_name, address_b, {"tier": "demo", "app": "back", "pod-template-hash": "6f4b8c7d5"},
            "back-6f4b8c7d5"),
    ]


if args[:2] == ["get", "pods"]:
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods("b")}))
elif args[:2] == ["get", "pods,services,endpointslices"]:
    snapshots = sum(1 for line in open(calls) if line.startswith("get pods,services"))
    b_name = "b" if snapshots <= 1 else "b-2"
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "back", "namespace": "demo"},
               "spec": {"clusterIP": "10.96.7.7", "clusterIPs": ["10.96.7.7"],
                        "ports": [{"port": 8000}]}}
    endpoints = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                 "metadata": {"name": "back-x1", "namespace": "demo",
                              "labels": {"kubernetes.io/service-name": "back"}},
                 "addressType": "IPv4",
                 "endpoints": [{"addresses": [address_b],
                                "targetRef": {"kind": "Pod", "name": b_name}}]}
    print(json.dumps({"apiVersion": "v1", "kind": "List",
                      "items": pods(b_name) + [service, endpoints]}))
elif args[:2] == ["exec", "-i"]:
    # exec -i --namespace NS POD --container C -- COMMAND...
    pod_name = args[4]
    command = args[args.index("--") + 1:]
    os.execvp("ip", ["ip", "netns", "exec", f"{prefix}-{pod_name}"] + command)
else:
    sys.exit(f"kubectl.py: not a call blackbox collect makes: {' '.join(args)}")
