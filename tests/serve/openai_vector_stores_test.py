#!/usr/bin/env python3
"""The official OpenAI Python client against `kvik serve`'s Files and
Vector Stores APIs.

    openai_vector_stores_test.py --base-url http://127.0.0.1:PORT/v1 --api-key KEY --other-key KEY2

Run by tests/test_serve_stores.c on a server of all-MiniLM-L6-v2 with two
API keys, in the venv of scripts/serve-venv.sh. The client is used as an
application would: files uploaded, stores made with file_ids, files added
one by one (create_and_poll) and in batches (upload_and_poll), searched
with filters, thresholds and every ranker, listed page by page, updated
and deleted; the second key is another tenant and sees none of it. Prints
one line per check and "N passed, N failed"; exits 1 if anything failed.
"""
import argparse
import io
import sys
import traceback

import openai
from openai import OpenAI

DOCS = {
    "thermo.txt": "The NV-TH220 thermometer measures from minus forty to one hundred and fifty degrees "
                  "Celsius. Its battery lasts two years with one reading a minute.",
    "returns-eu.txt": "In the European Union, unused products may be returned within thirty days of "
                      "delivery for a full refund; the customer pays the return shipping.",
    "returns-us.txt": "In the United States, unused products may be returned within sixty days of "
                      "purchase; return shipping is free with the prepaid label.",
    "bread.txt": "Sourdough bread rises because wild yeast and lactic acid bacteria ferment the flour "
                 "and make carbon dioxide, which the gluten traps as bubbles.",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--api-key", required=True)
    ap.add_argument("--other-key", required=True)
    args = ap.parse_args()
    client = OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=120)
    other = OpenAI(base_url=args.base_url, api_key=args.other_key, max_retries=0, timeout=120)
    checks = []
    state = {}

    def check(name):
        def wrap(fn):
            checks.append((name, fn))
            return fn
        return wrap

    @check("files.create uploads text files; retrieve and content give them back")
    def _():
        ids = {}
        for name, text in DOCS.items():
            f = client.files.create(file=(name, io.BytesIO(text.encode()), "text/plain"), purpose="assistants")
            assert f.object == "file" and f.filename == name and f.bytes == len(text.encode()), f
            assert f.purpose == "assistants" and f.id.startswith("file-"), f
            ids[name] = f.id
        state["files"] = ids
        got = client.files.retrieve(ids["bread.txt"])
        assert got.filename == "bread.txt", got
        assert client.files.content(ids["bread.txt"]).read() == DOCS["bread.txt"].encode()

    @check("files.list pages through every file, newest first")
    def _():
        seen = [f.id for f in client.files.list(limit=2)]  # the iterator follows `after`
        assert sorted(seen) == sorted(state["files"].values()), seen
        assert seen[0] == state["files"]["bread.txt"], seen
        first = client.files.list(limit=1, order="asc")
        assert first.data[0].id == state["files"]["thermo.txt"] and first.has_more, first

    @check("vector_stores.create with file_ids indexes them; the store counts them")
    def _():
        ids = state["files"]
        vs = client.vector_stores.create(name="docs", file_ids=[ids["thermo.txt"], ids["bread.txt"]],
                                         metadata={"team": "support"})
        assert vs.object == "vector_store" and vs.status == "completed", vs
        assert vs.file_counts.completed == 2 and vs.file_counts.total == 2, vs.file_counts
        assert vs.metadata == {"team": "support"} and vs.usage_bytes > 0, vs
        state["vs"] = vs.id

    @check("vector_stores.files.create_and_poll adds files with attributes")
    def _():
        ids, vs = state["files"], state["vs"]
        for name, region in (("returns-eu.txt", "eu"), ("returns-us.txt", "us")):
            f = client.vector_stores.files.create_and_poll(vector_store_id=vs, file_id=ids[name],
                                                           attributes={"region": region, "year": 2025})
            assert f.status == "completed" and f.last_error is None, f
            assert f.attributes == {"region": region, "year": 2025}, f.attributes
            assert f.chunking_strategy.type == "static", f.chunking_strategy
            assert f.chunking_strategy.static.max_chunk_size_tokens == 800, f.chunking_strategy
        files = list(client.vector_stores.files.list(vector_store_id=vs))
        assert len(files) == 4, files

    @check("search finds the passage that answers, with every ranker")
    def _():
        vs = state["vs"]
        for ranker in ("auto", "none", "dense", "bm25", "hybrid"):
            page = client.vector_stores.search(vector_store_id=vs, query="How long does the NV-TH220 battery last?",
                                               ranking_options={"ranker": ranker})
            hits = list(page)
            assert hits and hits[0].filename == "thermo.txt", (ranker, hits)
            assert hits[0].content[0].type == "text" and "two years" in hits[0].content[0].text, hits[0]
        hits = list(client.vector_stores.search(vector_store_id=vs, query="why does dough rise"))
        assert hits[0].filename == "bread.txt", hits

    @check("a filter applies before ranking")
    def _():
        vs = state["vs"]
        hits = list(client.vector_stores.search(vector_store_id=vs, query="how many days do I have to return it",
                                                filters={"type": "eq", "key": "region", "value": "us"}))
        assert [h.filename for h in hits] == ["returns-us.txt"], hits
        hits = list(client.vector_stores.search(
            vector_store_id=vs, query="thermometer",
            filters={"type": "and", "filters": [{"type": "in", "key": "region", "value": ["eu", "us"]},
                                                {"type": "gte", "key": "year", "value": 2025}]}))
        assert sorted(h.filename for h in hits) == ["returns-eu.txt", "returns-us.txt"], hits
        hits = list(client.vector_stores.search(vector_store_id=vs, query="thermometer",
                                                filters={"type": "eq", "key": "region", "value": "jp"}))
        assert hits == [], hits

    @check("score_threshold drops weak hits; an empty result is an answer")
    def _():
        vs = state["vs"]
        hits = list(client.vector_stores.search(vector_store_id=vs, query="NV-TH220 thermometer battery",
                                                ranking_options={"score_threshold": 0.3}))
        assert hits and all(h.score >= 0.3 for h in hits), hits
        none = list(client.vector_stores.search(vector_store_id=vs, query="the rules of cricket",
                                                ranking_options={"score_threshold": 0.5}))
        assert none == [], none

    @check("file_batches.upload_and_poll uploads and indexes a batch")
    def _():
        vs = state["vs"]
        files = [("a.txt", io.BytesIO(b"Calibration of the FM-5 flux meter takes ten minutes."), "text/plain"),
                 ("b.bin", io.BytesIO(b"\x00\xff\xfe binary"), "application/octet-stream")]
        batch = client.vector_stores.file_batches.upload_and_poll(vector_store_id=vs, files=files)
        assert batch.status == "completed" and batch.file_counts.total == 2, batch
        assert batch.file_counts.completed == 1 and batch.file_counts.failed == 1, batch.file_counts
        listed = list(client.vector_stores.file_batches.list_files(vector_store_id=vs, batch_id=batch.id))
        assert len(listed) == 2, listed
        failed = [f for f in listed if f.status == "failed"]
        assert failed and failed[0].last_error.code == "unsupported_file", failed

    @check("another API key sees none of it")
    def _():
        vs, fid = state["vs"], state["files"]["bread.txt"]
        assert [f.id for f in other.files.list()] == []
        assert list(other.vector_stores.list()) == []
        for call in (lambda: other.files.retrieve(fid), lambda: other.vector_stores.retrieve(vs),
                     lambda: other.vector_stores.search(vector_store_id=vs, query="bread"),
                     lambda: other.files.delete(fid),
                     lambda: other.vector_stores.files.create(vector_store_id=vs, file_id=fid)):
            try:
                call()
                raise AssertionError("another tenant reached it")
            except openai.NotFoundError:
                pass
        mine = other.vector_stores.create(name="mine")
        try:
            other.vector_stores.files.create(vector_store_id=mine.id, file_id=fid)
            raise AssertionError("another tenant's file was added")
        except openai.NotFoundError:
            pass
        hits = list(other.vector_stores.search(vector_store_id=mine.id, query="bread"))
        assert hits == [], hits

    @check("update, delete and bad requests")
    def _():
        vs = state["vs"]
        up = client.vector_stores.update(vector_store_id=vs, name="renamed",
                                         expires_after={"anchor": "last_active_at", "days": 7})
        assert up.name == "renamed" and up.expires_after.days == 7 and up.expires_at, up
        f = client.vector_stores.files.update(vector_store_id=vs, file_id=state["files"]["returns-eu.txt"],
                                              attributes={"region": "jp"})
        assert f.attributes == {"region": "jp"}, f
        hits = list(client.vector_stores.search(vector_store_id=vs, query="returns",
                                                filters={"type": "eq", "key": "region", "value": "jp"}))
        assert [h.filename for h in hits] == ["returns-eu.txt"], hits
        d = client.vector_stores.files.delete(vector_store_id=vs, file_id=state["files"]["bread.txt"])
        assert d.deleted, d
        hits = list(client.vector_stores.search(vector_store_id=vs, query="sourdough bread yeast"))
        assert all(h.filename != "bread.txt" for h in hits), hits
        for bad in ({"query": ""}, {"query": "x", "max_num_results": 0},
                    {"query": "x", "filters": {"type": "like", "key": "a", "value": 1}},
                    {"query": "x", "ranking_options": {"ranker": "magic"}}):
            try:
                client.post(f"/vector_stores/{vs}/search", body=bad, cast_to=object)
                raise AssertionError(f"accepted {bad}")
            except openai.BadRequestError:
                pass
        assert client.files.delete(state["files"]["bread.txt"]).deleted
        assert client.vector_stores.delete(vs).deleted
        try:
            client.vector_stores.retrieve(vs)
            raise AssertionError("a deleted store is still there")
        except openai.NotFoundError:
            pass

    failed = 0
    for name, fn in checks:
        try:
            fn()
            print(f"ok   {name}")
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc(file=sys.stdout)
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
