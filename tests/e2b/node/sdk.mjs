// The stock npm `e2b` SDK against Siesta, configured only by E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY. Prints one JSON line of what it saw;
// tests/e2b/test_node_sdk_docker.py checks it.
import { Sandbox, CommandExitError, NotFoundError } from 'e2b'

const seen = {}
const sandbox = await Sandbox.create('base', { metadata: { from: 'node' } })
try {
  const run = await sandbox.commands.run('echo "$(whoami) in $(pwd)"')
  seen.stdout = run.stdout
  try {
    await sandbox.commands.run('exit 4')
  } catch (error) {
    seen.exitError = error instanceof CommandExitError ? error.exitCode : String(error)
  }
  const written = await sandbox.files.write('node/hello.txt', 'from node ✓')
  seen.writtenPath = written.path
  seen.read = await sandbox.files.read('node/hello.txt')
  try {
    await sandbox.files.read('node/missing.txt')
  } catch (error) {
    seen.missing = error instanceof NotFoundError ? 'NotFoundError' : String(error)
  }
  const info = await sandbox.getInfo()
  seen.metadata = info.metadata
  seen.running = await sandbox.isRunning()
} finally {
  seen.killed = await sandbox.kill()
}
seen.runningAfterKill = await sandbox.isRunning()
console.log(JSON.stringify(seen))
