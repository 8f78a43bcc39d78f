"""nbgrader's own commands and the Formgrader, on the course's own steps.

    commands    nbgrader's commands and the Formgrader's buttons take the course's path
    steps       what those commands do, as root or through the class's grading service
    formgrader  the Formgrader of the class server
"""
