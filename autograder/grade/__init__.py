"""Grading: one learner, storing the outcome, a class in parallel, and what each needs.

    learner     one learner: restore, run in the sandbox, verify, score; the class in parallel
    submission  a learner's notebook file read without trusting it
    audit       static reading of each submission, findings for a human
    restore     locked test cells put back as the release has them
    verify      graded functions checked again outside the learner's kernel
    secret      the class's grading secret, which learners cannot read
    gradebook   scores in nbgrader's gradebook
    cluster     where learners are graded: worker processes of a local or an existing Dask
                cluster (settings: dask.yaml)
    workers     what grading needs of every worker: one thread, the same course, a sandbox
"""
