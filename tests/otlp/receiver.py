#!/usr/bin/env python3
"""A strict OTLP/HTTP trace receiver for checking blackbox's `--otlp` export.

Serves POST /v1/traces with Content-Type application/json (OTLP/JSON) or
application/x-protobuf, decodes the body into opentelemetry-proto's
ExportTraceServiceRequest and checks every span as a collector or back end would.
Answers as OTLP/HTTP does: 200 with an ExportTraceServiceResponse (its
partial_success says how many spans were rejected and why), or 400 with a
google.rpc.Status when the request cannot be decoded. See README.md beside this file.

    python receiver.py --port 0 --report /tmp/report.json
"""

import argparse
import base64
import collections
import gzip
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

JSON = "application/json"
PROTOBUF = "application/x-protobuf"

# OTLP/JSON: these bytes fields are hex strings, not base64 (spec, "JSON Protobuf
# Encoding"); each is the id's length in bytes. Keys by JSON name and proto name.
SPAN_IDS = {"traceId": 16, "trace_id": 16, "spanId": 8, "span_id": 8,
            "parentSpanId": 8, "parent_span_id": 8}
LINK_IDS = {"traceId": 16, "trace_id": 16, "spanId": 8, "span_id": 8}
KIND_NAMES = {v.number: v.name for v in Span.SpanKind.DESCRIPTOR.values}


class BadRequest(Exception):
    """The request cannot be decoded: answered with 400."""


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise BadRequest(f"duplicate JSON key {key!r}")
    return dict(pairs)


def _hex_to_base64(obj, fields, where):
    for key, length in fields.items():
        if key not in obj:
            continue
        value = obj[key]
        if not isinstance(value, str):
            raise BadRequest(f"{where}.{key}: expected a hex string, got {json.dumps(value)}")
        if value == "":
            continue  # an empty id: decodes to no bytes (checked per span below)
        if len(value) != 2 * length:
            raise BadRequest(
                f"{where}.{key}: {value!r} is {len(value)} characters; OTLP/JSON wants "
                f"{2 * length} hex digits ({length} bytes)")
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise BadRequest(f"{where}.{key}: {value!r} is not hex (OTLP/JSON ids are hex, not base64)")
        obj[key] = base64.b64encode(raw).decode()


def _items(obj, *keys):
    """The list under the first of `keys` in `obj` (JSON or proto name); [] if absent."""
    for key in keys:
        if isinstance(obj, dict) and key in obj and isinstance(obj[key], list):
            return obj[key]
    return []


def decode_json(body):
    """OTLP/JSON bytes -> ExportTraceServiceRequest, strictly (unknown field: BadRequest)."""
    try:
        doc = json.loads(body.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except (UnicodeDecodeError, ValueError) as e:
        raise BadRequest(f"not JSON: {e}")
    if not isinstance(doc, dict):
        raise BadRequest("not a JSON object")
    # Ids: hex in OTLP/JSON, base64 in proto3 JSON; convert where the spec puts them.
    for r, rs in enumerate(_items(doc, "resourceSpans", "resource_spans")):
        for s, ss in enumerate(_items(rs, "scopeSpans", "scope_spans")):
            for i, span in enumerate(_items(ss, "spans")):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                if not isinstance(span, dict):
                    continue  # Parse says what is wrong
                _hex_to_base64(span, SPAN_IDS, where)
                for j, link in enumerate(_items(span, "links")):
                    if isinstance(link, dict):
                        _hex_to_base64(link, LINK_IDS, f"{where}.links[{j}]")
    request = ExportTraceServiceRequest()
    try:
        # Accepts lowerCamelCase and proto field names, enums as integers or names,
        # 64-bit integers as strings or numbers; an unknown field is an error.
        json_format.Parse(json.dumps(doc), request, ignore_unknown_fields=False)
    except json_format.ParseError as e:
        raise BadRequest(f"not an ExportTraceServiceRequest: {e}")
    return request


def _unknown_fields(message, path="request"):
    """Paths of messages that carry fields their descriptor does not know (protobuf)."""
    found = []
    try:
        from google.protobuf import unknown_fields
        if len(unknown_fields.UnknownFieldSet(message)):
            found.append(path)
    except ImportError:  # older protobuf
        if message.UnknownFields():
            found.append(path)
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        repeated = getattr(field, "is_repeated", None)  # protobuf 7 dropped .label
        if repeated is None:
            repeated = field.label == field.LABEL_REPEATED
        if repeated:
            if field.message_type.GetOptions().map_entry:
                continue
            for i, item in enumerate(value):
                found += _unknown_fields(item, f"{path}.{field.name}[{i}]")
        else:
            found += _unknown_fields(value, f"{path}.{field.name}")
    return found


def decode_protobuf(body):
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as e:
        raise BadRequest(f"not an ExportTraceServiceRequest: {e}")
    unknown = _unknown_fields(request)
    if unknown:
        raise BadRequest(f"unknown fields in {', '.join(unknown[:5])}"
                         + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""))
    return request


def span_problems(span):
    """What a collector or back end would reject in one span (empty: fine)."""
    problems = []
    if len(span.trace_id) != 16:
        problems.append("trace id not 16 bytes")
    elif span.trace_id == bytes(16):
        problems.append("trace id all zero")
    if len(span.span_id) != 8:
        problems.append("span id not 8 bytes")
    elif span.span_id == bytes(8):
        problems.append("span id all zero")
    if span.parent_span_id and len(span.parent_span_id) != 8:
        problems.append("parent span id neither empty nor 8 bytes")
    if span.end_time_unix_nano < span.start_time_unix_nano:
        problems.append("end before start")
    if span.start_time_unix_nano == 0:
        problems.append("start time 0")
    if span.kind == Span.SPAN_KIND_UNSPECIFIED:
        problems.append("kind unspecified")
    if not span.name:
        problems.append("empty name")
    return problems


def service_name(resource_spans):
    for kv in resource_spans.resource.attributes:
        if kv.key == "service.name" and kv.value.WhichOneof("value") == "string_value":
            return kv.value.string_value
    return None


def examine(request):
    """Checks every span; returns this request's summary (see README.md)."""
    accepted = rejected = 0
    reasons = collections.Counter()
    warnings = collections.Counter()
    services = collections.Counter()
    kinds = collections.Counter()
    # trace id -> {span id}, [(span id, parent id)]
    spans_of = collections.defaultdict(set)
    links_of = collections.defaultdict(list)
    trace_of_span = collections.defaultdict(set)
    for rs in request.resource_spans:
        service = service_name(rs)
        if service is None:
            warnings["resource without service.name"] += 1
        for ss in rs.scope_spans:
            for span in ss.spans:
                problems = span_problems(span)
                if not problems and span.span_id in spans_of[span.trace_id]:
                    problems.append("span id repeated in its trace")
                if problems:
                    rejected += 1
                    reasons.update(problems)
                    continue
                accepted += 1
                services[service if service is not None else "(no service.name)"] += 1
                kinds[KIND_NAMES.get(span.kind, str(span.kind))] += 1
                spans_of[span.trace_id].add(span.span_id)
                trace_of_span[span.span_id].add(span.trace_id)
                links_of[span.trace_id].append((span.span_id, span.parent_span_id))
                if span.status.code == span.status.STATUS_CODE_ERROR:
                    warnings["spans with status ERROR (informational)"] += 1
    traces = {}
    unresolved = {}
    roots = collections.Counter()
    for trace_id, links in links_of.items():
        missing = []
        for span_id, parent in links:
            if not parent:
                roots[trace_id] += 1
            elif parent not in spans_of[trace_id]:
                elsewhere = parent in trace_of_span and trace_id not in trace_of_span[parent]
                missing.append({"span": span_id.hex(), "parent": parent.hex(),
                                "parent_in_another_trace": elsewhere})
        traces[trace_id.hex()] = not missing
        if missing:
            unresolved[trace_id.hex()] = missing
    no_root = sum(1 for t in links_of if roots[t] == 0)
    many_roots = sum(1 for t in links_of if roots[t] > 1)
    if no_root:
        warnings["traces without a root span"] = no_root
    if many_roots:
        warnings["traces with more than one root span"] = many_roots
    return {
        "spans": accepted + rejected,
        "accepted": accepted,
        "rejected": rejected,
        "reasons": dict(reasons),
        "warnings": dict(warnings),
        "services": dict(sorted(services.items())),
        "kinds": dict(sorted(kinds.items())),
        "traces": len(traces),
        "traces_all_parents_resolve": sum(traces.values()),
        "parents_resolve": traces,
        "unresolved_parents": unresolved,
    }


def response_for(summary):
    response = ExportTraceServiceResponse()
    if summary["rejected"]:
        response.partial_success.rejected_spans = summary["rejected"]
        response.partial_success.error_message = "; ".join(
            f"{n} {why}" for why, n in sorted(summary["reasons"].items()))
    return response


def rpc_status(code, message, content_type):
    """A google.rpc.Status body (code 3 = INVALID_ARGUMENT), encoded by hand."""
    if content_type == JSON:
        return json.dumps({"code": code, "message": message}).encode()

    def varint(n):
        out = bytearray()
        while True:
            byte, n = n & 0x7F, n >> 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                return bytes(out)
    text = message.encode()
    return b"\x08" + varint(code) + b"\x12" + varint(len(text)) + text


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, report_path):
        super().__init__(address, Handler)
        self.report_path = report_path
        self.lock = threading.Lock()
        self.report = {"requests": 0, "status_codes": {}, "accepted": 0, "rejected": 0,
                       "reasons": {}, "services": {}, "kinds": {}, "per_request": []}

    def record(self, entry):
        with self.lock:
            r = self.report
            r["requests"] += 1
            code = str(entry["status"])
            r["status_codes"][code] = r["status_codes"].get(code, 0) + 1
            for key in ("accepted", "rejected"):
                r[key] += entry.get(key, 0)
            for key in ("reasons", "services", "kinds"):
                for name, n in entry.get(key, {}).items():
                    r[key][name] = r[key].get(name, 0) + n
            r["per_request"].append(entry)
            if self.report_path:
                tmp = self.report_path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(r, f, indent=1)
                os.replace(tmp, self.report_path)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "blackbox-otlp-check"

    def log_message(self, format, *args):  # quiet: the report says what happened
        pass

    def answer(self, status, content_type, body):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.answer(405, "text/plain", b"POST OTLP to /v1/traces\n")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        entry = {"path": self.path, "content_type": content_type, "bytes": len(body)}
        if self.path.split("?")[0] != "/v1/traces":
            entry["status"] = 404
            self.server.record(entry)
            return self.answer(404, "text/plain", b"only /v1/traces\n")
        if content_type not in (JSON, PROTOBUF):
            entry["status"] = 415
            self.server.record(entry)
            return self.answer(415, "text/plain",
                               f"Content-Type must be {JSON} or {PROTOBUF}\n".encode())
        try:
            if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
                try:
                    body = gzip.decompress(body)
                except (OSError, EOFError) as e:
                    raise BadRequest(f"bad gzip body: {e}")
            request = decode_json(body) if content_type == JSON else decode_protobuf(body)
            summary = examine(request)
        except BadRequest as e:
            entry.update(status=400, error=str(e))
            self.server.record(entry)
            return self.answer(400, content_type, rpc_status(3, str(e), content_type))
        except Exception as e:  # a bug here, not in the request: say so, do not hang up
            entry.update(status=500, error=f"receiver error: {e!r}")
            self.server.record(entry)
            return self.answer(500, content_type, rpc_status(13, entry["error"], content_type))
        entry.update(status=200, **summary)
        self.server.record(entry)
        response = response_for(summary)
        if content_type == JSON:
            out = json_format.MessageToJson(response, indent=None).encode()
        else:
            out = response.SerializeToString()
        self.answer(200, content_type, out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=4318, help="0: any free port (default 4318)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--report", help="JSON summary rewritten after each request")
    args = parser.parse_args(argv)
    server = Receiver((args.host, args.port), args.report)
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
