"""Collecting submissions: folders, LMS zips, the nbgrader exchange -> <course>/submitted/.

    sources   the collect step: every entry of the three sources judged, then stored
    names     student ids, and what an acceptable name is
    folders   folders read through file descriptors (links never followed)
    links     hard links: whose work a file with several names is
    zips      LMS zips read member by member, without trusting their headers
    report    what a run found: candidates, submissions taken, the report
    store     the newest copy of each learner's chapter into submitted/, with its timestamp
"""
