#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Pub/Sub of app/cr-kv against redis-server 7 as the oracle, on loopback.

  kv_pubsub_test.py CR_KV TEST [--lcores 1|2] [--driver auto|uring|epoll]

  oracle   the same steps against cr-kv and redis, every reply and pushed frame compared
           byte for byte: SUBSCRIBE/PSUBSCRIBE/UNSUBSCRIBE/PUNSUBSCRIBE replies, message and
           pmessage frames, PUBLISH's receiver count, subscribed-mode errors and PING,
           PUBSUB NUMSUB/NUMPAT/CHANNELS before and after subscribers disconnect; on two
           lcores the subscribers and the publisher are placed on different lcores.
  clients  redis-py's PubSub and redis-cli SUBSCRIBE on one lcore, PUBLISH from the other.
  stress   P publishers x S subscribers (seeded): every subscriber gets exactly every
           message once, each publisher's in the order it published them.
  slow     a subscriber that does not read is closed past the pubsub class's 32mb hard
           limit; a reading subscriber of the same channel gets every message; NUMSUB
           counts one after.

Exits 0 (pass), 1 (fail), 77 (skip). Every wait is bounded.
"""
import os
import random
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kv_test  # noqa: E402
from kv_test import Conn, Failure, check, conn_on_lcore, log, need, resp, SKIP  # noqa: E402


def lcore_of(c):
    m = re.search(rb"lcore=(\d+)", c.cmd("CLIENT", "INFO"))
    return int(m.group(1)) if m else None


class Run:
    """One server's side of a scenario: clients placed on lcores, what each was sent."""

    def __init__(self, port, lcores):
        self.port, self.lcores = port, lcores
        self.c = {}
        self.where = {}
        self.seen = []

    def conn(self, who, lcore):
        self.c[who] = conn_on_lcore(self.port, lcore % self.lcores)
        self.where[who] = lcore_of(self.c[who])

    def cmd(self, who, *args, n=1):
        self.c[who].send(resp(*args))
        self.read(who, n, args)

    def read(self, who, n, what="read"):
        for r in self.c[who].replies(n, 15):
            self.seen.append((who, what, r))

    def sorted_array(self, who, *args):
        """A reply whose order Redis does not define (CHANNELS): its elements sorted."""
        r = self.c[who].cmd(*args)
        head, _, body = r.partition(b"\r\n")
        items = []
        while body:
            ln, _, rest = body.partition(b"\r\n")
            n = int(ln[1:])
            items.append(rest[:n])
            body = rest[n + 2:]
        self.seen.append((who, args, head, sorted(items)))

    def close(self, who):
        self.c.pop(who).close()

    def wait_numsub(self, ch, n, timeout=5.0):
        """A disconnect is seen by the server a little later: poll NUMSUB (bounded)."""
        deadline = time.monotonic() + timeout
        c = Conn(self.port)
        while time.monotonic() < deadline:
            r = c.cmd("PUBSUB", "NUMSUB", ch)
            if r.endswith(b":%d\r\n" % n):
                c.close()
                return
            time.sleep(0.01)
        raise Failure("NUMSUB %s did not reach %d (%r)" % (ch, n, r))


def scenario(r):
    # s1, s2 subscribe on lcore 1, s3 on lcore 0; the publisher is on lcore 0
    r.conn("s1", 1)
    r.conn("s2", 1)
    r.conn("s3", 0)
    r.conn("p", 0)
    r.cmd("s1", "SUBSCRIBE", "news", "sport", n=2)
    r.cmd("s1", "SUBSCRIBE", "news", n=1)  # again: counted once
    r.cmd("s2", "PSUBSCRIBE", "n*", "x?z", n=2)
    r.cmd("s3", "SUBSCRIBE", "news", n=1)
    r.cmd("s3", "PSUBSCRIBE", "n*", n=1)
    r.cmd("p", "PUBLISH", "news", "hello")  # s1, s2 (n*), s3, s3 (n*): 4
    r.read("s1", 1)
    r.read("s2", 1)
    r.read("s3", 2)
    r.cmd("p", "PUBLISH", "xyz", "")  # s2 by x?z
    r.read("s2", 1)
    r.cmd("p", "PUBLISH", "nobody", "a\r\nb")  # s2, s3 by n*
    r.read("s2", 1)
    r.read("s3", 1)
    r.cmd("p", "PUBLISH", "zzz", "none")
    r.cmd("p", "MULTI")
    r.cmd("p", "PUBLISH", "sport", "in a transaction")
    r.cmd("p", "EXEC")
    r.read("s1", 1)
    # subscribed mode: only (P)(UN)SUBSCRIBE, PING, QUIT
    r.cmd("s1", "GET", "k")
    r.cmd("s1", "PUBLISH", "news", "x")
    r.cmd("s1", "CLIENT", "ID")
    r.cmd("s1", "PING")
    r.cmd("s1", "PING", "there")
    r.cmd("s1", "PUBSUB", "NUMPAT")
    r.cmd("s1", "NOSUCHCMD")
    r.cmd("s1", "SUBSCRIBE")
    r.cmd("p", "PUBSUB", "NUMSUB", "news", "sport", "n*", "none")
    r.cmd("p", "PUBSUB", "NUMSUB")
    r.cmd("p", "PUBSUB", "NUMPAT")  # n* counted once though on two lcores
    r.sorted_array("p", "PUBSUB", "CHANNELS")
    r.sorted_array("p", "PUBSUB", "CHANNELS", "n*")
    r.cmd("p", "PUBSUB", "CHANNELS", "a", "b")
    r.cmd("p", "PUBSUB", "nope")
    r.cmd("p", "PUBSUB", "NUMPAT", "x")
    # (PUBSUB HELP differs: no SHARDCHANNELS / SHARDNUMSUB, see doc/guides/kv.md)
    r.cmd("p", "PING")  # not subscribed: +PONG
    r.cmd("p", "UNSUBSCRIBE")  # not subscribed: nil and 0
    r.cmd("p", "PUNSUBSCRIBE", "n*")
    # unsubscribing counts down and leaves subscribed mode
    r.cmd("s1", "UNSUBSCRIBE", "sport", "never")
    r.cmd("s1", "PUBLISH", "news", "still")
    r.cmd("s1", "UNSUBSCRIBE")  # the last one: news
    r.cmd("s1", "GET", "k")
    r.cmd("s3", "PUNSUBSCRIBE")
    r.cmd("p", "PUBLISH", "news", "after")  # s3 only (s2's n* too)
    r.read("s2", 1)
    r.read("s3", 1)
    # disconnects leave no registration behind, on any lcore
    r.close("s2")
    r.close("s3")
    r.wait_numsub("news", 0)
    r.cmd("p", "PUBSUB", "NUMSUB", "news", "sport")
    r.cmd("p", "PUBSUB", "NUMPAT")
    r.cmd("p", "PUBSUB", "CHANNELS")
    r.cmd("p", "PUBLISH", "news", "gone")


def t_oracle(o):
    need("redis-server")
    red = o.redis()
    ours, theirs = Run(o.kv.port, o.lcores), Run(red.port, 1)
    scenario(ours)
    if o.lcores > 1:
        want = {"s1": 1, "s2": 1, "s3": 0, "p": 0}
        check(ours.where == want, "placement: %r" % ours.where)
    scenario(theirs)
    check(len(ours.seen) == len(theirs.seen), "step counts differ")
    for a, b in zip(ours.seen, theirs.seen):
        check(a == b, "differs from redis:\n  cr-kv %r\n  redis %r" % (a, b))
    log("%d replies and frames identical to redis's" % len(ours.seen))


def import_redis():
    try:
        import redis
    except ImportError:
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            import redis
        except ImportError:
            log("SKIP: python3-redis not installed")
            sys.exit(SKIP)
    return redis


def t_clients(o):
    redis = import_redis()
    need("redis-cli")
    port = o.kv.port
    # redis-py's PubSub; the publishers below are on every lcore, so on two lcores
    # one of them is on another lcore than the subscriber, whichever it landed on
    r = redis.Redis(port=port, socket_timeout=10)
    ps = r.pubsub()
    ps.subscribe("py")
    msg = ps.get_message(timeout=5)
    check(msg == {"type": "subscribe", "pattern": None, "channel": b"py", "data": 1},
          "subscribe: %r" % msg)
    ps.psubscribe("q*")
    msg = ps.get_message(timeout=5)
    check(msg["type"] == "psubscribe" and msg["data"] == 2, "psubscribe: %r" % msg)
    counts = []
    for lcore in range(o.lcores):
        pub = conn_on_lcore(port, lcore)
        counts.append(pub.cmd("PUBLISH", "py", "from%d" % lcore))
        counts.append(pub.cmd("PUBLISH", "qz", "pat%d" % lcore))
        pub.close()
    check(counts == [b":1\r\n"] * (2 * o.lcores), "PUBLISH counts: %r" % counts)
    got = []
    deadline = time.monotonic() + 10
    while len(got) < 2 * o.lcores and time.monotonic() < deadline:
        m = ps.get_message(timeout=1)
        if m is not None:
            got.append((m["type"], m["channel"], m["data"]))
    want = []
    for lcore in range(o.lcores):
        want += [("message", b"py", b"from%d" % lcore), ("pmessage", b"qz", b"pat%d" % lcore)]
    check(got == want, "redis-py got %r" % got)
    check(r.pubsub_numsub("py") == [(b"py", 1)], "numsub")
    check(r.pubsub_numpat() == 1, "numpat")
    ps.close()
    # redis-cli SUBSCRIBE, publishers on every lcore
    cli = subprocess.Popen(["redis-cli", "-p", str(port), "SUBSCRIBE", "cli"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        c = Conn(port)
        while time.monotonic() < deadline and c.cmd("PUBSUB", "NUMSUB", "cli") != \
                b"*2\r\n$3\r\ncli\r\n:1\r\n":
            time.sleep(0.01)
        for lcore in range(o.lcores):
            pub = conn_on_lcore(port, lcore)
            check(pub.cmd("PUBLISH", "cli", "m%d" % lcore) == b":1\r\n", "cli publish")
            pub.close()
        time.sleep(0.3)
    finally:
        cli.terminate()
        out, _ = cli.communicate(timeout=10)
    want = "subscribe\ncli\n1\n" + "".join("message\ncli\nm%d\n" % i for i in range(o.lcores))
    check(out.decode() == want, "redis-cli printed %r" % out)
    log("redis-py and redis-cli: subscribed, messages from %d lcore(s)" % o.lcores)


def t_stress(o, seed=7, pubs=4, subs=6, per=300):
    """Exact counts, per-publisher order, publishers and subscribers over both lcores."""
    rng = random.Random(seed)
    port = o.kv.port
    chans = ["st%d" % i for i in range(3)]
    sc = []
    for i in range(subs):
        c = conn_on_lcore(port, i % o.lcores)
        mine = sorted(rng.sample(chans, rng.randint(1, len(chans))))
        c.send(resp("SUBSCRIBE", *mine))
        c.replies(len(mine), 10)
        pat = rng.random() < 0.5
        if pat:
            c.send(resp("PSUBSCRIBE", "st*"))
            c.replies(1, 10)
        sc.append((c, set(mine), pat))
    pc = [conn_on_lcore(port, (i + 1) % o.lcores) for i in range(pubs)]
    plan = [(rng.randrange(pubs), rng.choice(chans)) for _ in range(pubs * per)]
    seq = [0] * pubs
    sent = []
    for p, ch in plan:
        seq[p] += 1
        sent.append((p, ch, seq[p]))
    # each publisher pipelines its messages in chunks; counts checked exactly
    for p in range(pubs):
        mine = [(ch, n) for q, ch, n in sent if q == p]
        for i in range(0, len(mine), 50):
            chunk = mine[i:i + 50]
            pc[p].send(b"".join(resp("PUBLISH", ch, "%d:%d" % (p, n)) for ch, n in chunk))
            reps = pc[p].replies(len(chunk), 20)
            for (ch, n), rep in zip(chunk, reps):
                want = sum((ch in s) + pat for _, s, pat in sc)
                check(rep == b":%d\r\n" % want, "PUBLISH %s %d:%d answered %r, want %d"
                      % (ch, p, n, rep, want))
    total = 0
    for c, mine, pat in sc:
        expect = [(p, ch, n) for p, ch, n in sent if ch in mine]
        nframes = len(expect) + (len(sent) if pat else 0)
        frames = c.replies(nframes, 30)
        last = {}
        plain = []
        for f in frames:
            parts = f.split(b"\r\n")
            kind = parts[2]
            data = parts[-2].decode()
            p, n = (int(v) for v in data.split(":"))
            key = (kind, p)
            check(last.get(key, 0) < n, "order: %r after %r" % (data, last.get(key)))
            last[key] = n
            if kind == b"message":
                plain.append((p, parts[4].decode(), n))
        check(sorted(plain) == sorted(expect), "a subscriber's messages differ")
        total += nframes
    log("%d publishers x %d subscribers: %d frames, exact, in order" % (pubs, subs, total))
    # churn: subscribers on both lcores go (some without reading) while messages flow;
    # afterwards only the kept ones are registered, on any lcore
    keep = []
    for i in range(40):
        c = conn_on_lcore(port, i % o.lcores)
        c.send(resp("SUBSCRIBE", "churn", "st0"))
        c.send(resp("PSUBSCRIBE", "ch*"))
        c.replies(3, 10)
        if rng.random() < 0.25:
            keep.append(c)
        else:
            pc[i % pubs].send(resp("PUBLISH", "churn", "x" * rng.randrange(1, 5000)))
            c.close()
            pc[i % pubs].replies(1, 10)
    deadline = time.monotonic() + 10
    want = b"*4\r\n$5\r\nchurn\r\n:%d\r\n$3\r\nst0\r\n:%d\r\n" % (len(keep), len(keep) + sum(
        "st0" in m for _, m, _ in sc))
    c = Conn(port)
    while time.monotonic() < deadline and c.cmd("PUBSUB", "NUMSUB", "churn", "st0") != want:
        time.sleep(0.01)
    check(c.cmd("PUBSUB", "NUMSUB", "churn", "st0") == want, "registrations left behind")
    check(c.cmd("PUBSUB", "NUMPAT") == b":%d\r\n" % (2 if (keep and any(p for *_, p in sc))
                                                     else 1 if (keep or any(p for *_, p in sc))
                                                     else 0), "numpat")
    check(pc[0].cmd("PUBLISH", "churn", "end") == b":%d\r\n" % (2 * len(keep)), "count")
    log("churn: %d of 40 subscribers kept, nothing left of the others" % len(keep))


def t_slow(o):
    port = o.kv.port
    slow = conn_on_lcore(port, o.lcores - 1)
    fast = conn_on_lcore(port, 0)
    for c in (slow, fast):
        c.send(resp("SUBSCRIBE", "big"))
        c.replies(1, 10)
    # the slow one by two patterns too: it is closed while the lcore walks its patterns
    slow.send(resp("PSUBSCRIBE", "b*", "*g"))
    slow.replies(2, 10)
    pub = conn_on_lcore(port, 0)
    payload = "x" * (256 * 1024)
    n = 200  # 50 MB: past the 32 MB hard limit
    counts = []
    got = 0
    for i in range(0, n, 10):
        pub.send(b"".join(resp("PUBLISH", "big", payload) for _ in range(10)))
        counts += pub.replies(10, 30)
        got += len(fast.replies(10, 30))
    check(got == n, "the reading subscriber got %d of %d" % (got, n))
    check(counts[0] == b":4\r\n" and counts[-1] == b":1\r\n", "counts %r..%r"
          % (counts[0], counts[-1]))
    slow.closed(timeout=30)
    check(Conn(port).cmd("PUBSUB", "NUMSUB", "big") == b"*2\r\n$3\r\nbig\r\n:1\r\n", "numsub")
    check(Conn(port).cmd("PUBSUB", "NUMPAT") == b":0\r\n", "numpat")
    info = Conn(port).cmd("INFO", "stats")
    check(b"client_output_buffer_limit_disconnections:1" in info, "not counted")
    log("a slow subscriber closed at the pubsub hard limit; the other got all %d" % n)


TESTS = {"oracle": t_oracle, "clients": t_clients, "stress": t_stress, "slow": t_slow}


def main():
    return kv_test.main(TESTS, __doc__)


if __name__ == "__main__":
    sys.exit(main())
