# ruff: noqa: T201, BLE001, SIM115  (a development script: prints its findings, tolerates a broker that is not up yet, hands log files to child processes)
"""Issue 30, item 2: the faust-streaming exactly_once scenario, against kompakt or Apache Kafka.

A development script (faust-streaming is not a kompakt dependency; install it in a venv of its
own: ``pip install faust-streaming==0.15.3 aiokafka==0.14.0 confluent-kafka==2.16.1``). It starts
a fresh broker (``kompakt serve`` from this checkout, or Kafka 4.1.2 through
``/work/shared/realkafka/start.sh`` with ``KAFKA_BUILD``), writes N keyed records over 3,000 keys
to a 2-partition input (2 % tombstones), creates the Table's changelog (2 partitions,
``segment.ms=1000``, ``min.cleanable.dirty.ratio=0.01``), runs ``faust_count_app.py`` (a count per
key, one output record ``partition:offset:count`` per input, exactly_once), SIGKILLs the app once
40 % of the inputs have a committed output and restarts it with its state deleted, SIGKILLs and
restarts the broker at 70 %, writes one probe per key at the end, and waits until every input
has an output. It prints the inputs with no output (lost) and with more than one (doubled) in
the read_committed output.

Usage: drive.py kompakt|kafka PORT N RUN_ID
(work files in $FAUST_WORK/run-KIND-RUN_ID, /tmp/faust-scenario by default)

With ``RECORD_PORT=P`` in the environment the broker advertises ``127.0.0.1:P``, where
``tools/kafka_wire_recorder.py`` (run with this checkout's venv) records every request and
response into ``wire.jsonl`` of the work directory; ``restore.t`` holds the time the app was
restarted. The run then stops once the restarted app has processed every input (the
restart-and-restore phase), without the broker kill.
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KIND, PORT, N, RUN = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
BOOT = f"127.0.0.1:{PORT}"
HERE = Path(__file__).parent
WORK = Path(os.environ.get("FAUST_WORK", "/tmp/faust-scenario")) / f"run-{KIND}-{RUN}"
shutil.rmtree(WORK, ignore_errors=True)
WORK.mkdir(parents=True)
INPUT, OUTPUT, APP_ID = f"in-{RUN}", f"out-{RUN}", f"app-{RUN}"
KEYS = 3000
RECORD_PORT = int(os.environ.get("RECORD_PORT", "0"))
APP_BOOT = f"127.0.0.1:{RECORD_PORT}" if RECORD_PORT else BOOT


def start_broker():
    if KIND == "kompakt":
        cmd = [
            str(Path(__file__).resolve().parents[2] / ".venv/bin/kompakt"),
            "serve",
            "--data-dir",
            str(WORK / "broker"),
            "--port",
            str(PORT),
            "--admin-port",
            "-1",
            "--override",
            "group.initial.rebalance.delay.ms=0",
            "--override",
            "log.cleaner.backoff.ms=1000",
        ]
        if RECORD_PORT:
            cmd += ["--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{RECORD_PORT}"]
        env = dict(os.environ)
    else:
        cmd = [
            "/work/shared/realkafka/start.sh",
            str(WORK / "broker"),
            str(PORT),
            "log.cleaner.backoff.ms=1000",
        ]
        if RECORD_PORT:
            listeners = f"PLAINTEXT://127.0.0.1:{RECORD_PORT},CONTROLLER://127.0.0.1:{PORT + 1}"
            cmd.append(f"advertised.listeners={listeners}")
        env = {**os.environ, "KAFKA_BUILD": "/work/rk/build"}
    p = subprocess.Popen(cmd, env=env, stdout=open(WORK / "broker.out", "a"), stderr=subprocess.STDOUT)
    (WORK / "pids").open("a").write(f"{p.pid}\n")
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            AdminClient({"bootstrap.servers": BOOT}).list_topics(timeout=2)
            return p
        except Exception:
            time.sleep(0.5)
    raise SystemExit("broker did not start")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(tag):
    shutil.rmtree(WORK / "appdata", ignore_errors=True)
    env = {
        **os.environ,
        "BOOTSTRAP": APP_BOOT,
        "APP_ID": APP_ID,
        "INPUT": INPUT,
        "OUTPUT": OUTPUT,
        "DATADIR": str(WORK / "appdata"),
        # faust binds its web port even with web_enabled=False; a fixed one can be taken by any
        # client socket's ephemeral port (a run of this script once failed that way)
        "WEB_PORT": str(free_port()),
    }
    p = subprocess.Popen(
        [sys.executable, str(HERE / "faust_count_app.py")],
        env=env,
        cwd=WORK,
        stdout=open(WORK / f"app-{tag}.log", "w"),
        stderr=subprocess.STDOUT,
    )
    (WORK / "pids").open("a").write(f"{p.pid}\n")
    return p


def outputs():
    c = Consumer(
        {
            "bootstrap.servers": BOOT,
            "group.id": f"r-{time.time()}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(OUTPUT, p, OFFSET_BEGINNING) for p in (0, 1)])
    eof, got = set(), []
    deadline = time.time() + 30
    while len(eof) < 2 and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
            continue
        got.append(m.value().decode())
    c.close()
    return got


if RECORD_PORT:
    recorder = subprocess.Popen(
        [
            str(Path(__file__).resolve().parents[2] / ".venv/bin/python"),
            str(HERE.parent / "kafka_wire_recorder.py"),
            "record",
            str(RECORD_PORT),
            BOOT,
            str(WORK / "wire.jsonl"),
        ],
        stdout=open(WORK / "recorder.out", "w"),
        stderr=subprocess.STDOUT,
    )
    (WORK / "pids").open("a").write(f"{recorder.pid}\n")
broker = start_broker()
a = AdminClient({"bootstrap.servers": BOOT})
CHANGELOG_CONFIG = {"cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01"}
for f in a.create_topics(
    [
        NewTopic(INPUT, 2, 1),
        NewTopic(OUTPUT, 2, 1),
        NewTopic(f"{APP_ID}-counts-changelog", 2, 1, config=CHANGELOG_CONFIG),
    ]
).values():
    f.result()
time.sleep(2)  # Kafka creates topics asynchronously; faust checks the changelog's partitions
rng = random.Random(int(RUN) if RUN.isdigit() else 7)
prod = Producer({"bootstrap.servers": BOOT, "linger.ms": 5})
inputs = [f"key-{rng.randrange(KEYS)}".encode() for _ in range(N)]
tombstones = [rng.random() < 0.02 for _ in range(N)]


def produce_inputs(start, stop):
    for i in range(start, stop):
        prod.produce(INPUT, key=inputs[i], value=None if tombstones[i] else b"v%d" % i)
    prod.flush()


def trickle(start, stop, seconds):
    """Inputs at a steady rate: the app is then killed mid-stream on either broker, with
    transactions committed before and one open, whatever its start-up time."""
    step = max(1, (stop - start) // 50)
    for i in range(start, stop, step):
        produce_inputs(i, min(i + step, stop))
        time.sleep(seconds / 50)


# Recording: the first half trickles in once the app is consuming; the second half is written
# while the app is down, so the restarted app has work after its restore.
produce_inputs(0, 100 if RECORD_PORT else N)
total = N
app = start_app("1")
stage = 0
trickling = None
deadline = time.time() + 900
while time.time() < deadline:
    time.sleep(2 if not RECORD_PORT else 0.5)
    got_now = outputs()
    done = len({tuple(v.split(":")[:2]) for v in got_now})
    print(f"{time.strftime('%X')} distinct inputs done {done}/{total} (outputs {len(got_now)})", flush=True)
    if RECORD_PORT and trickling is None and done >= 50:
        trickling = threading.Thread(target=trickle, args=(100, N // 2, 12.0), daemon=True)
        trickling.start()
    if stage == 0 and done >= (0.4 * N if not RECORD_PORT else 0.3 * N):
        app.send_signal(signal.SIGKILL)
        app.wait()
        if RECORD_PORT:
            trickling.join()
            produce_inputs(N // 2, N)
        (WORK / "restore.t").write_text(f"{time.time()}\n")
        app = start_app("2")
        stage = 1
        print("app killed and restarted", flush=True)
    elif stage == 1 and RECORD_PORT and done >= N:
        print("restore phase recorded", flush=True)
        break
    elif stage == 1 and not RECORD_PORT and done >= 0.7 * N:
        broker.send_signal(signal.SIGKILL)
        broker.wait()
        broker = start_broker()
        stage = 2
        print("broker killed and restarted", flush=True)
    elif stage == 2 and done >= N:
        prod = Producer({"bootstrap.servers": BOOT})
        for k in range(KEYS):
            prod.produce(INPUT, key=f"key-{k}".encode(), value=b"probe")
        prod.flush()
        total = N + KEYS
        stage = 3
    elif stage == 3 and done >= total:
        break
app.send_signal(signal.SIGTERM)
try:
    app.wait(30)
except Exception:
    app.kill()
got = outputs()
by_input = Counter(tuple(v.split(":")[:2]) for v in got)
# expected inputs: every offset of both input partitions
c = Consumer({"bootstrap.servers": BOOT, "group.id": "x"})
ends = {p: c.get_watermark_offsets(TopicPartition(INPUT, p), timeout=10)[1] for p in (0, 1)}
c.close()
expected = {(str(p), str(o)) for p in (0, 1) for o in range(ends[p])}
lost = sorted(expected - set(by_input), key=lambda x: (int(x[0]), int(x[1])))
doubled = sorted(((k, n) for k, n in by_input.items() if n > 1), key=lambda x: (int(x[0][0]), int(x[0][1])))
print(
    "RESULT",
    KIND,
    RUN,
    "inputs",
    len(expected),
    "outputs",
    len(got),
    "lost",
    len(lost),
    lost[:20],
    "doubled",
    len(doubled),
    doubled[:20],
    flush=True,
)
broker.send_signal(signal.SIGTERM)
broker.wait(60)
if RECORD_PORT:
    recorder.terminate()
