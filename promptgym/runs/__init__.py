"""The run skeleton every kind of training shares: its folder and what is in it, one writer each.

    run = RunFolder.create(Path("runs"), "dates")   # runs/<id>/ with checkpoints/ and run.json
    run.update_status(status="running")             # run.json: the one status writer (StatusFile)
    run.append_event({"event": "train_begin"})      # events.jsonl: the one event writer (EventLog)

``folder`` (the run folder and its listing), ``status`` (``run.json``), ``events``
(``events.jsonl``), ``history`` (``history.csv``), ``checkpoints`` (a program's, and where a weight
run continues), ``stop`` (stop requests and signals), ``attempt`` (one attempt of a run: started and
finished events, how it ended), ``loggers`` (the guarded listeners), ``process_identity``. Prompt
learning (``training.fit``), the weight runs (``finetune.weight_run``) and the CLI all write through these;
the formats are in docs/runs.md.
"""
