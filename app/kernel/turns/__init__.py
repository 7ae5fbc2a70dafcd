"""The turn core: what runs one turn of a session, below every capability that drives one.

runner (one task per busy session), turn (one turn's steps), steps (one model request and its
tools), tooling (the tool table a step sees), inputs, queue, activity (the session's one state),
loopguard, context (what a request carries), compaction, titles.
"""
