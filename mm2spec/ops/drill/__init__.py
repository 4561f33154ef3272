"""A DR drill: the bundled playbooks run under synthetic load, judged by what the drill reads.

- ``drill``: phases, samples and switches of one drill run
- ``checks``: where groups resume, which records were found
- ``report``: report.md and a self-contained report.html from the drill's JSON
- ``plots``: the report's matplotlib PNGs
"""
