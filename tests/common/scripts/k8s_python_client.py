#!/usr/bin/env python3
"""Lists (in pages) and watches Services with the official Kubernetes Python client (Debian's
python3-kubernetes), printing what it saw as JSON lines, so a test can check that the fake API
server speaks the protocol a real client expects.

Usage: k8s_python_client.py URL CA_FILE TOKEN LABEL_SELECTOR EVENTS
Prints one line for the list, then one line per watch event (bookmarks skipped) until EVENTS
events were seen.
"""
import json
import sys

from kubernetes import client, watch


def main():
    url, ca, token, selector, want = sys.argv[1:6]
    cfg = client.Configuration()
    cfg.host = url
    cfg.ssl_ca_cert = ca
    cfg.api_key = {"authorization": token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    api = client.CoreV1Api(client.ApiClient(cfg))

    names, cont, pages = [], None, 0
    while True:
        kw = {"limit": 2, "label_selector": selector}
        if cont:
            kw["_continue"] = cont
        page = api.list_service_for_all_namespaces(**kw)
        pages += 1
        names += ["%s/%s" % (s.metadata.namespace, s.metadata.name) for s in page.items]
        cont = page.metadata._continue
        if not cont:
            break
    rv = page.metadata.resource_version
    print(json.dumps({"list": sorted(names), "pages": pages, "rv": rv}), flush=True)

    seen = 0
    w = watch.Watch()
    for ev in w.stream(
        api.list_service_for_all_namespaces,
        label_selector=selector,
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=20,
    ):
        if ev["type"] == "BOOKMARK":
            continue
        raw = ev["raw_object"]
        out = {"type": ev["type"], "name": raw["metadata"]["name"]}
        if ev["type"] != "ERROR":
            # The typed model: proves the object decoded as a V1Service.
            out["port"] = ev["object"].spec.ports[0].port
        print(json.dumps(out), flush=True)
        seen += 1
        if seen >= int(want):
            w.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
