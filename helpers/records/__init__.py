"""Recorded results: run an experiment live where the hardware is here, replay it elsewhere.

A recording is ``results/<machine>/<notebook>/<experiment>.json`` (its attachments beside it): an
environment header, a fingerprint of the code that made it, and the result. A machine name stands
for a kind of machine (``2xNVIDIA-H200``); a newer recording replaces an older one.
"""

from .checksums import CHECKSUMS, write_checksums
from .export import INDEX_NAME, figure_rows, index_row, read_index, write_index
from .fingerprints import (
    MEASURING_CODE,
    MEASURING_VERSION,
    fingerprint,
    fingerprint_source,
    free_names,
    measuring_code_hash,
)
from .footprints import FOOTPRINTS, footprint_sentence, gather_footprints, notebook_footprint
from .machines import Interrupted, machine_folders, replace_folders
from .notebook_reader import NotebookExperiment, experiments_in_notebook
from .running import (
    DESCRIBE_WIDTH,
    Choice,
    Run,
    choose_recording,
    recorded_runs,
    replay_plan,
    run_or_replay,
    where_numbers_come_from,
)
from .staleness import Problem, check_recordings, format_problems
from .store import (
    HEADER_KEYS,
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
    "check_recordings",
    "choose_recording",
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
    "validate_machine_folder",
    "validate_recording",
    "where_numbers_come_from",
    "write_checksums",
    "write_index",
]
