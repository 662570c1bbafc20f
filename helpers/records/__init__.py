"""Recorded results: run an experiment live where the hardware is here, replay it elsewhere.

An experiment is a plain function in a notebook; its body is the PyTorch code being taught.
``run_or_replay(fn, notebook=..., gpus=N, params=...)`` calls it when this machine has ``N``
GPUs, and otherwise loads what it returned on a GPU machine, saying in its first sentence
which machine is replayed and why.

A recording is ``results/<machine>/<notebook>/<experiment>.json``: an environment header (the
machine as ``hardware.describe()`` saw it, the date, the commit, the parameters) plus a
*fingerprint* of the code that produced it. The fingerprint covers the experiment's source,
the source of every notebook function it reaches, and ``MEASURING_VERSION`` (the helpers'
measuring code); the parameters are compared value by value. ``check_recordings`` reads the
notebooks without running them and lists every recording that is missing, stale, broken or
left over, machine by machine. Files an experiment attaches (Chrome traces) sit beside it.

Replay is explicit: ``COURSE_REPLAY_MACHINE`` names a recorded machine (an unknown name is an
error that lists them); otherwise the machine this one is, if it recorded the experiment, else
the recorded machine with the most GPUs (then the newest recording, then the name).

A machine name stands for a kind of machine (``2xNVIDIA-H200``): two hosts with the same GPUs
share it, and a newer recording replaces an older one; git history keeps the older, and each
recording keeps its own host's report in its header.

The package holds one module per job: ``fingerprints``, ``header``, ``store`` (save and load),
``machines`` (which machines are recorded; replacing their folders as one step),
``checksums`` (the sha256 of every recorded file), ``footprints`` (the memory each notebook needs), ``replay_choice``, ``running`` (run or replay), ``notebook_reader`` (the static reader),
``validation``, ``staleness`` and ``export`` (``results/index.jsonl``). Everything public is
imported here, so notebooks, tools and tests write ``records.run_or_replay``.
"""

from .checksums import CHECKSUMS, write_checksums
from .export import INDEX_NAME, figure_rows, index_row, read_index, write_index
from .fingerprints import (
    MEASURING_CODE,
    MEASURING_VERSION,
    check_experiment,
    fingerprint,
    fingerprint_source,
    free_names,
    measuring_code_hash,
)
from .footprints import FOOTPRINTS, footprint_sentence, gather_footprints, notebook_footprint
from .header import HEADER_KEYS, environment_header
from .machines import Interrupted, machine_folders, replace_folders
from .notebook_reader import NotebookExperiment, experiments_in_notebook
from .replay_choice import Choice, choose_recording
from .running import (
    DESCRIBE_WIDTH,
    Run,
    recorded_runs,
    replay_plan,
    run_or_replay,
    where_numbers_come_from,
)
from .staleness import Problem, check_recordings, format_problems, stale_recordings
from .store import (
    RecordingError,
    load,
    read_header,
    recorded_machine_names,
    recorded_machines,
    recording_path,
    recordings_of,
    rerecord_command,
    save,
)
from .validation import (
    GAPS_FILE,
    gap_machines,
    recording_gaps,
    validate_machine_folder,
    validate_recording,
)

__all__ = [
    "CHECKSUMS",
    "FOOTPRINTS",
    "DESCRIBE_WIDTH",
    "GAPS_FILE",
    "HEADER_KEYS",
    "INDEX_NAME",
    "MEASURING_CODE",
    "MEASURING_VERSION",
    "Choice",
    "Interrupted",
    "NotebookExperiment",
    "Problem",
    "RecordingError",
    "Run",
    "check_experiment",
    "check_recordings",
    "choose_recording",
    "environment_header",
    "experiments_in_notebook",
    "figure_rows",
    "footprint_sentence",
    "gather_footprints",
    "fingerprint",
    "fingerprint_source",
    "format_problems",
    "free_names",
    "gap_machines",
    "index_row",
    "load",
    "machine_folders",
    "notebook_footprint",
    "measuring_code_hash",
    "read_header",
    "read_index",
    "recorded_machine_names",
    "recorded_machines",
    "recorded_runs",
    "recording_gaps",
    "recording_path",
    "recordings_of",
    "replace_folders",
    "replay_plan",
    "rerecord_command",
    "run_or_replay",
    "save",
    "stale_recordings",
    "validate_machine_folder",
    "validate_recording",
    "where_numbers_come_from",
    "write_checksums",
    "write_index",
]
