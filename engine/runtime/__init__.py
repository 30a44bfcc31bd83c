"""The runtime: stages over experta (the only importer of experta), working memory, the actions a
firing rule takes, and the justifications it records.
"""
