#!/usr/bin/env python3
"""Reads a Lease with the official Kubernetes Python client (Debian's python3-kubernetes) as
the typed V1Lease, and checks the fake API server's optimistic concurrency the way the client
meets it: an update with a stale resourceVersion is refused with 409, one with the current
version is taken. Prints one JSON line, so a test can check that the fake speaks the protocol
and that the Lease edgenetd wrote has the shape a real client decodes.

Usage: k8s_python_lease.py URL CA_FILE CERT KEY NAMESPACE NAME
"""
import json
import sys

from kubernetes import client
from kubernetes.client.rest import ApiException


def main():
    url, ca, cert, key, ns, name = sys.argv[1:7]
    cfg = client.Configuration()
    cfg.host = url
    cfg.ssl_ca_cert = ca
    cfg.cert_file = cert
    cfg.key_file = key
    api = client.CoordinationV1Api(client.ApiClient(cfg))

    lease = api.read_namespaced_lease(name, ns)
    out = {
        "holder": lease.spec.holder_identity,
        "duration": lease.spec.lease_duration_seconds,
        # Typed datetimes: the MicroTime strings parsed as the client parses them.
        "renew": lease.spec.renew_time.isoformat(),
        "acquire": lease.spec.acquire_time.isoformat(),
        "annotations": lease.metadata.annotations,
        "labels": lease.metadata.labels,
    }

    # Another client's Lease: created, then updated with a stale and with the current version.
    probe = client.V1Lease(
        metadata=client.V1ObjectMeta(name="python-probe", namespace=ns),
        spec=client.V1LeaseSpec(holder_identity="python", lease_duration_seconds=10),
    )
    made = api.create_namespaced_lease(ns, probe)
    try:
        api.create_namespaced_lease(ns, probe)
        out["create_again"] = 200
    except ApiException as e:
        out["create_again"] = e.status
    first_rv = made.metadata.resource_version
    made.spec.lease_duration_seconds = 20
    updated = api.replace_namespaced_lease("python-probe", ns, made)
    made.spec.lease_duration_seconds = 30
    made.metadata.resource_version = first_rv
    try:
        api.replace_namespaced_lease("python-probe", ns, made)
        out["stale_update"] = 200
    except ApiException as e:
        out["stale_update"] = e.status
    out["updated_duration"] = api.read_namespaced_lease("python-probe", ns).spec.lease_duration_seconds
    out["versions_differ"] = updated.metadata.resource_version != first_rv
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
