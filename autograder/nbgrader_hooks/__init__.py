"""nbgrader's own commands and the Formgrader, on the course's own steps.

    commands    nbgrader's commands and the Formgrader's buttons take the course's path
    formgrader  the Formgrader of the class server
"""
