"""Short run of the kill -9 campaign (scripts/kvstore_kill_campaign.py; the documented run uses
50+ kills): generate processes SIGKILLed while writing to the store leave no corrupt entry, no
wrong output and no temp file once the next process has opened the store."""
import json
import subprocess
import sys

from conftest import BINARY, ROOT


def test_short_kill_campaign(model, tmp_path):
    # 6 reused prompts for 6 runs (the full campaign's 16 are for 50+ kills): most are picked by
    # a killed run, so reading them back at the end still reads what killed writers left.
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "kvstore_kill_campaign.py"),
                        "--kills", "6", "--pool", "6", "--seed", "7", "--binary", str(BINARY), "--model", str(model),
                        "--workdir", str(tmp_path / "campaign")],
                       capture_output=True, text=True, timeout=900)
    assert r.stdout.strip(), r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0, summary
    assert summary["kills"] == 6
    assert summary["corrupt"] == 0 and summary["wrong_outputs"] == 0
    assert summary["leftover_temps"] == 0
