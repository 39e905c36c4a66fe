#!/usr/bin/env python3
"""Checks an OTLP/JSON export (blackbox nest --otlp FILE) against receiver.py.

    python check.py EXPORT.json [--expect-kinds CLIENT,SERVER]

Starts receiver.py on a free port (same interpreter), POSTs the file over HTTP as
application/json, converts it to protobuf and POSTs that as application/x-protobuf,
then prints a verdict. Exit 0: both accepted, 0 spans rejected, every parent id names
a span of the same trace; 1: not so (the verdict says why); 2: cannot run.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import opentelemetry.proto  # noqa: F401
    from google.protobuf import __version__ as PROTOBUF_VERSION
    from importlib.metadata import version
    VERSIONS = f"opentelemetry-proto {version('opentelemetry-proto')}, protobuf {PROTOBUF_VERSION}"
except ImportError as e:
    print(f"check.py: cannot import opentelemetry.proto ({e}) with {sys.executable}; "
          "run with the venv's python: see tests/otlp/README.md", file=sys.stderr)
    sys.exit(2)

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, HERE)
import receiver  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceResponse,
)
from google.protobuf import json_format  # noqa: E402


def short(kind):
    return kind[len("SPAN_KIND_"):] if kind.startswith("SPAN_KIND_") else kind


def post(port, body, content_type):
    """(HTTP status, decoded response or error text)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", data=body,
                                 headers={"Content-Type": content_type}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, data = r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as e:
        return None, f"no answer: {e}"
    response = ExportTraceServiceResponse()
    if content_type == receiver.JSON:
        json_format.Parse(data.decode(), response)
    else:
        response.ParseFromString(data)
    return status, response


def describe(name, status, response, entry):
    if status != 200:
        text = str(response)
        return f"{name}: HTTP {status}: {text[:400]}{'...' if len(text) > 400 else ''}"
    rejected = response.partial_success.rejected_spans
    text = f"{name}: HTTP 200, {entry.get('accepted', '?')} spans accepted, {rejected} rejected"
    if rejected:
        text += f" ({response.partial_success.error_message})"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export", help="OTLP/JSON file, as blackbox nest --otlp writes it")
    parser.add_argument("--expect-kinds", default="",
                        help="span kinds that must occur, e.g. CLIENT,SERVER")
    args = parser.parse_args()
    with open(args.export, "rb") as f:
        body = f.read()
    expect = [k.strip().upper() for k in args.expect_kinds.split(",") if k.strip()]
    expect = [k if k.startswith("SPAN_KIND_") else "SPAN_KIND_" + k for k in expect]

    tmp = tempfile.mkdtemp(prefix="otlp-check-")
    report_path = os.path.join(tmp, "report.json")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "receiver.py"), "--port", "0",
         "--report", report_path],
        stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            print(f"check.py: the receiver did not start (said {line!r})", file=sys.stderr)
            return 2
        port = int(line.split()[-1])
        json_status, json_response = post(port, body, receiver.JSON)
        try:
            pb = receiver.decode_json(body).SerializeToString()
        except receiver.BadRequest as e:
            pb, pb_status, pb_response = None, None, f"not converted: {e}"
        if pb is not None:
            pb_status, pb_response = post(port, pb, receiver.PROTOBUF)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    try:
        with open(report_path) as f:
            entries = json.load(f)["per_request"]
    except OSError:
        entries = []
    shutil.rmtree(tmp, ignore_errors=True)
    json_entry = entries[0] if entries else {}
    pb_entry = entries[1] if len(entries) > 1 else {}

    problems = []
    if json_status != 200:
        problems.append(f"the JSON request was refused (HTTP {json_status})")
    elif json_response.partial_success.rejected_spans:
        problems.append(f"{json_response.partial_success.rejected_spans} spans rejected "
                        f"({json_response.partial_success.error_message})")
    if pb is None:
        problems.append("no protobuf request (the JSON does not decode)")
    elif pb_status != 200:
        problems.append(f"the protobuf request was refused (HTTP {pb_status})")
    elif pb_response.partial_success.rejected_spans:
        problems.append(f"{pb_response.partial_success.rejected_spans} spans rejected over protobuf")
    for name, entry in (("JSON", json_entry), ("protobuf", pb_entry)):
        unresolved = entry.get("unresolved_parents") or {}
        if unresolved:
            example = next(iter(unresolved.items()))
            problems.append(f"{len(unresolved)} of {entry['traces']} traces ({name}) have a "
                            f"parent id naming no span of the same trace, e.g. trace "
                            f"{example[0]}: {example[1][0]}")
    if json_entry.get("status") == 200 and pb_entry.get("status") == 200:
        for key in ("accepted", "services", "kinds", "parents_resolve"):
            if json_entry[key] != pb_entry[key]:
                problems.append(f"JSON and protobuf requests differ in {key}")
    kinds = json_entry.get("kinds", {})
    missing = [k for k in expect if not kinds.get(k)]
    if missing:
        have = ", ".join(f"{short(k)} {n}" for k, n in kinds.items()) or "none"
        problems.append(f"no span of kind {', '.join(map(short, missing))} (kinds: {have})")

    parts = [describe("JSON", json_status, json_response, json_entry)]
    if pb is not None:
        parts.append(describe(f"protobuf ({len(pb)} bytes)", pb_status, pb_response, pb_entry))
    else:
        parts.append("protobuf: not sent (the JSON does not decode)")
    if json_entry.get("status") == 200:
        services = ", ".join(f"{s} {n}" for s, n in json_entry["services"].items())
        kind_text = ", ".join(f"{short(k)} {n}" for k, n in kinds.items())
        parts.append(f"{json_entry['traces']} traces, {json_entry['traces_all_parents_resolve']} "
                     f"with every parent id resolved; services: {services}; kinds: {kind_text}")
        if json_entry["warnings"]:
            parts.append("warnings: " + ", ".join(f"{why} {n}" for why, n in json_entry["warnings"].items()))
    verdict = "OK" if not problems else "FAIL"
    text = f"{verdict}: {args.export} (receiver on {VERSIONS}). " \
        + "; ".join(parts) + "."
    if problems:
        text += " Problems: " + "; ".join(problems) + "."
    print(text)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
