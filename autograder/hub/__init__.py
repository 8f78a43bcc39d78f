"""The class server (`make hub`): a JupyterHub on one machine with the nbgrader exchange.

    classroom.py            the state folder, the roster and the learners' system accounts
    auth.py                 who may log in: the roster's passwords, or the LMS (configure_login)
    lti.py                  a class that logs in from its LMS (LTI 1.3): settings, keys, launches
    lti_login.py            the LTI 1.3 login (JupyterHub's ltiauthenticator), roles from launches
    lti_grades.py           grades back into the LMS (LTI Assignment and Grade Services)
    spawner.py              each learner's JupyterLab, as their own user in a view of their own
    limits.py               what each learner's server may use (memory, CPU weight, processes)
    settings.py             the class's settings files (JSON in the state folder), read
    jupyterhub_config.py    JupyterHub's configuration (`jupyterhub -f` reads it)
    package.json            the pinned configurable-http-proxy, installed with npm

Instructors add learners with ``python -m autograder hub add NAME ...`` (see
:mod:`autograder.hub.classroom`). Running the same class on Kubernetes is described in
``autograder/deploy/README.md``.
"""
