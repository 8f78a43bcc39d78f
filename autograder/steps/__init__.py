"""The steps of a course that are neither collecting nor grading, one module each.

    release    solutions/ -> notebooks/, chapters recorded in the gradebook
    exchange   the nbgrader exchange: chapters out to learners, feedback back to them
    view       what a class's learners see of the course's own code
    feedback   HTML pages for learners
    report     the summary table and the grades CSV
"""
