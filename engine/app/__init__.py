"""Applications built on the layers below: plan one pool, plan and pack several, the interview, explain
/ why-not / audit, kb check, rule docs and rule tests.
"""
