"""Copy detection: learners compared with the course's own code and with each other.

    detect        the check of a chapter's class, its flags and when it runs
    report        the class report of the pairs found
    fingerprints  token fingerprints of code units, compared with copydetect
    normalise     code units reduced to what a disguise cannot change
    canonical     one spelling for each operation, in the syntax tree normalise reads
    pairs         the units compared, the pairs found and the figures that flag them
    common        what honest learners write alike: the corpus that ships, no evidence
    policy        what a flag does to a score, the same in every chapter
"""
