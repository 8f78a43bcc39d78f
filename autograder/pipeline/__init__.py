"""The grading pipeline, one module per step that a submission goes through.

    release     solutions/ -> notebooks/, chapters recorded in the gradebook
    collect     folders, LMS zips, the nbgrader exchange -> <course>/submitted/
    audit       static reading of each submission, findings for a human
    restore     locked test cells put back as the release has them
    grade       one learner: restore, run in the sandbox, verify, score; the class in parallel
    verify      graded functions checked again outside the learner's kernel
    gradebook   scores in nbgrader's gradebook
    feedback    HTML pages for learners
    report      the summary table and the grades CSV
"""
