#!/usr/bin/env python3
"""Writes privacy/referrer_sources.tsv from Matomo's searchengine-and-social-list
(CC0 1.0): AIAssistants.yml, Socials.yml, SearchEngines.yml in the folder given.

    python3 scripts/referrer-sources.py PATH/TO/searchengine-and-social-list COMMIT

Each line is host, source name and kind (ai, social or search), tab-separated;
a host seen in an earlier file keeps its first entry (AI assistants, then
social networks, then search engines: facebook.com is a social network even
though Matomo also lists its search). A host ending in ".{}" stands for any
top-level domain; a search engine's host must hold its name's first word. See docs/intake.md#source-names.
"""
import os, re, sys, yaml

src, commit = sys.argv[1], sys.argv[2]
seen, rows = set(), []
def add(host, name, kind):
    host = host.strip().lower()
    if host.startswith("www."):
        host = host[4:]
    if host.startswith("{}."):
        host = host[3:]  # any subdomain: the lookup tries parent domains
    if "{}" in host[:-2]:
        return
    if kind == "search":
        # Matomo also lists sites that embed an engine's results (cnn.com as
        # Google), matched there with the search's parameters; by host alone
        # they would be mislabelled, so a search host must hold the engine's
        # first word.
        word = re.sub(r"[^a-z0-9]", "", name.lower().split()[0])
        if not word or word not in host.replace(".", "").replace("-", ""):
            return
    if not host or "/" in host or "\t" in host or host in seen:
        return
    seen.add(host)
    rows.append((host, name, kind))

for fname, kind in (("AIAssistants.yml", "ai"), ("Socials.yml", "social")):
    with open(os.path.join(src, fname)) as f:
        for name, hosts in yaml.safe_load(f).items():
            for h in hosts or []:
                add(str(h), str(name), kind)
with open(os.path.join(src, "SearchEngines.yml")) as f:
    for name, entries in yaml.safe_load(f).items():
        for e in entries or []:
            for h in e.get("urls") or []:
                add(str(h), str(name), "search")

out = os.path.join(os.path.dirname(__file__), "..", "privacy", "referrer_sources.tsv")
with open(out, "w") as f:
    f.write("# Referrer hosts to source names: Matomo's searchengine-and-social-list, commit %s,\n" % commit)
    f.write("# CC0 1.0 (github.com/matomo-org/searchengine-and-social-list). Made by scripts/referrer-sources.py.\n")
    for r in sorted(rows):
        f.write("\t".join(r) + "\n")
print(len(rows), "hosts")
