"""The one build step pyproject.toml cannot declare: a wheel carries the workflow fwbench runs.

The Snakefile, rules/ (with the config and result schemas), report/ (templates, stylesheet,
captions, the published claims), scripts/, profiles/, the default config and the image lock
live beside the package in the repository, where the workflow finds them. A wheel copies them
into fwbench/_workflow/, where ``fwbench.SOURCE_DIR`` finds them when fwbench is installed
without a checkout (``pip install .``), so ``fwbench rebuild`` works from any folder. An
editable install reads the checkout itself. MANIFEST.in puts the same files in the sdist.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

WORKFLOW_FILES = ("Snakefile", "config.yaml", "rules/*.smk", "rules/schemas/*.yaml",
                  "report/*.*", "report/captions/*", "report/templates/**/*.j2", "scripts/*.py",
                  "profiles/*/config.yaml", "containers/images.lock")


class BuildWithWorkflow(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib, "fwbench", "_workflow")
        for pattern in WORKFLOW_FILES:
            for source in sorted(Path().glob(pattern)):
                self.mkpath(str(target / source.parent))
                self.copy_file(str(source), str(target / source), preserve_mode=False)


setup(cmdclass={"build_py": BuildWithWorkflow})
