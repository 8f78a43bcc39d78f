"""nbgrader's settings on Kubernetes: the course id and ngshare as the exchange.

Mounted as /etc/jupyter/nbgrader_config.py in every user's server (z2jh-values.yaml). The
course's own layers (autograder/learner/jupyter) come first on JUPYTER_CONFIG_PATH; without
TRANSFORMER_COURSE_EXCHANGE, its exchange layer leaves the exchange to this file.
"""

from ngshare_exchange import configureExchange

c = get_config()  # noqa: F821 (nbgrader provides get_config when it reads this file)
c.CourseDirectory.course_id = "build-the-transformer"
configureExchange(c, "http://ngshare.default.svc.cluster.local:8080/services/ngshare")
