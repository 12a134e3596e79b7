from kerneltune.cli import app

app(prog_name="kerneltune")
