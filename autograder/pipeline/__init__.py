"""The grading pipeline, one module per step that a submission goes through.

    release         solutions/ -> notebooks/, chapters recorded in the gradebook
    exchange        the nbgrader exchange: chapters out to learners, feedback back to them
    view            what a class's learners see of the course's own code
    collect         folders, LMS zips, the nbgrader exchange -> <course>/submitted/
    submission      a learner's notebook file read without trusting it
    audit           static reading of each submission, findings for a human
    restore         locked test cells put back as the release has them
    secret          the class's grading secret, which learners cannot read
    grade           one learner: restore, run in the sandbox, verify, score; the class in parallel
    cluster         where learners are graded: worker processes of a local or an existing Dask
                    cluster (settings: dask.yaml)
    workers         what grading needs of every worker: one thread, the same course, a sandbox
    verify          graded functions checked again outside the learner's kernel
    gradebook       scores in nbgrader's gradebook
    feedback        HTML pages for learners
    report          the summary table and the grades CSV
    plain_nbgrader  nbgrader's own commands and the Formgrader's buttons take the course's path
    formgrader      the Formgrader of the class server
"""
