// Command pulumi-language-python is mm2spec's own, minimal Pulumi language host for Python programs.
//
// Pulumi's upstream Python language host is a separate Go module that the Go module proxy this
// project can reach does not serve, so the CLI's `runtime: python` plugin is this program instead.
// It speaks the LanguageRuntime gRPC protocol from github.com/pulumi/pulumi/sdk/v3 and starts the
// Python program through the `pulumi-language-python-exec` script that ships in that same module
// (installed beside this binary by scripts/install-pulumi.sh), so the Python side is Pulumi's own.
//
// Supported: `pulumi preview/up/destroy/refresh/about` for a pip-style project. The interpreter is
// `<virtualenv>/bin/python` when Pulumi.yaml sets `runtime.options.virtualenv` (relative paths are
// taken from the folder holding Pulumi.yaml), else $PULUMI_PYTHON_CMD, else the first `python3` on
// PATH. Dependency installation, code generation, templates and policy packs are not supported.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// version is stamped by scripts/install-pulumi.sh with -ldflags "-X main.version=v<PULUMI_VERSION>".
var version = "v0.0.0-dev"

// userActionableExit is the exit code pulumi-language-python-exec uses after it has already shown
// the user an error: the engine must then bail without printing another one.
const userActionableExit = 32

const execScriptName = "pulumi-language-python-exec"

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	mu            sync.Mutex
	engineAddress string
	execScript    string
}

func main() {
	// The engine starts language hosts as `pulumi-language-python [flags] <engine address>`.
	// Flags differ between CLI versions; none matters here, so keep the last positional argument.
	engineAddress := ""
	for _, arg := range os.Args[1:] {
		if !strings.HasPrefix(arg, "-") {
			engineAddress = arg
		}
	}
	if len(os.Args) == 2 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(version)
		return
	}

	script, err := findExecScript()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
	h := &host{engineAddress: engineAddress, execScript: script}

	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, h)
			return nil
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: could not start the gRPC server: %v\n", err)
		os.Exit(1)
	}
	// The engine reads exactly one line from stdout: the port to dial.
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
}

// findExecScript locates pulumi-language-python-exec: $PULUMI_LANGUAGE_PYTHON_EXEC, else beside this
// binary (symlinks resolved), else on PATH.
func findExecScript() (string, error) {
	if p := os.Getenv("PULUMI_LANGUAGE_PYTHON_EXEC"); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			candidate := filepath.Join(filepath.Dir(real), execScriptName)
			if _, err := os.Stat(candidate); err == nil {
				return candidate, nil
			}
		}
	}
	if p, err := exec.LookPath(execScriptName); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found beside this binary nor on PATH; rerun scripts/install-pulumi.sh", execScriptName)
}

// python is the interpreter chosen for one program, and the environment it runs with.
type python struct {
	exe string
	env []string
}

// resolvePython picks the interpreter from the program's runtime options (see the package comment).
func resolvePython(info *pulumirpc.ProgramInfo) (python, error) {
	opts := map[string]any{}
	root := ""
	if info != nil {
		root = info.GetRootDirectory()
		if info.GetOptions() != nil {
			opts = info.GetOptions().AsMap()
		}
	}
	toolchain, _ := opts["toolchain"].(string)
	virtualenv, _ := opts["virtualenv"].(string)
	switch toolchain {
	case "", "pip":
	case "uv":
		if virtualenv == "" {
			virtualenv = ".venv"
		}
	default:
		return python{}, fmt.Errorf("runtime option toolchain=%q is not supported by this language host "+
			"(use pip with a virtualenv option)", toolchain)
	}

	env := os.Environ()
	if virtualenv != "" {
		if !filepath.IsAbs(virtualenv) {
			virtualenv = filepath.Join(root, virtualenv)
		}
		exe := filepath.Join(virtualenv, "bin", "python")
		if _, err := os.Stat(exe); err != nil {
			return python{}, fmt.Errorf("the virtualenv option in Pulumi.yaml names %s, but %s does not exist; "+
				"create it first (scripts/setup)", virtualenv, exe)
		}
		env = withoutVars(env, "PYTHONHOME", "VIRTUAL_ENV", "PATH")
		env = append(env,
			"VIRTUAL_ENV="+virtualenv,
			"PATH="+filepath.Join(virtualenv, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
		return python{exe: exe, env: env}, nil
	}
	if cmd := os.Getenv("PULUMI_PYTHON_CMD"); cmd != "" {
		return python{exe: cmd, env: env}, nil
	}
	exe, err := exec.LookPath("python3")
	if err != nil {
		return python{}, errors.New("no python3 on PATH and no virtualenv option in Pulumi.yaml")
	}
	return python{exe: exe, env: env}, nil
}

func withoutVars(env []string, names ...string) []string {
	out := env[:0:0]
next:
	for _, kv := range env {
		for _, name := range names {
			if strings.HasPrefix(kv, name+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

func (h *host) Handshake(_ context.Context, req *pulumirpc.LanguageHandshakeRequest) (
	*pulumirpc.LanguageHandshakeResponse, error,
) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if req.GetEngineAddress() != "" {
		h.engineAddress = req.GetEngineAddress()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

// GetRequiredPlugins and GetRequiredPackages report nothing: the programs mm2spec runs use only the
// dynamic-provider plugin (pulumi-resource-pulumi-python), which ships beside the CLI.
func (h *host) GetRequiredPlugins(context.Context, *pulumirpc.GetRequiredPluginsRequest) (
	*pulumirpc.GetRequiredPluginsResponse, error,
) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *host) GetRequiredPackages(context.Context, *pulumirpc.GetRequiredPackagesRequest) (
	*pulumirpc.GetRequiredPackagesResponse, error,
) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

func (h *host) RuntimeOptionsPrompts(context.Context, *pulumirpc.RuntimeOptionsRequest) (
	*pulumirpc.RuntimeOptionsResponse, error,
) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

// InstallDependencies does nothing: the project's virtualenv is made by its own setup script.
func (h *host) InstallDependencies(*pulumirpc.InstallDependenciesRequest,
	grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse],
) error {
	return nil
}

func (h *host) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	py, err := resolvePython(req.GetInfo())
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, py.exe, "--version")
	cmd.Env = py.env
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", py.exe, err)
	}
	return &pulumirpc.AboutResponse{
		Executable: py.exe,
		Version:    strings.TrimPrefix(strings.TrimSpace(string(out)), "Python "),
	}, nil
}

func (h *host) GetProgramDependencies(ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest) (
	*pulumirpc.GetProgramDependenciesResponse, error,
) {
	py, err := resolvePython(req.GetInfo())
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, py.exe, "-m", "pip", "list", "--format=json", "--disable-pip-version-check")
	cmd.Env = py.env
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s -m pip list: %w", py.exe, err)
	}
	var listed []struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal(out, &listed); err != nil {
		return nil, fmt.Errorf("parsing pip list output: %w", err)
	}
	resp := &pulumirpc.GetProgramDependenciesResponse{}
	for _, p := range listed {
		resp.Dependencies = append(resp.Dependencies, &pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version})
	}
	return resp, nil
}

// Run starts the Python program through pulumi-language-python-exec and waits for it.
func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	py, err := resolvePython(req.GetInfo())
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}

	config, err := json.Marshal(nonNilMap(req.GetConfig()))
	if err != nil {
		return nil, err
	}
	secretKeys, err := json.Marshal(nonNilSlice(req.GetConfigSecretKeys()))
	if err != nil {
		return nil, err
	}

	h.mu.Lock()
	engine := h.engineAddress
	h.mu.Unlock()

	args := []string{"-u", h.execScript,
		"--monitor", req.GetMonitorAddress(),
		"--engine", engine,
		"--project", req.GetProject(),
		"--stack", req.GetStack(),
		"--pwd", req.GetPwd(),
		"--dry_run", strconv.FormatBool(req.GetDryRun()),
		"--parallel", strconv.Itoa(int(req.GetParallel())),
	}
	if org := req.GetOrganization(); org != "" {
		args = append(args, "--organization", org)
	}
	if root := req.GetInfo().GetRootDirectory(); root != "" {
		args = append(args, "--root_directory", root)
	}
	program := req.GetProgram()
	if program == "" {
		program = "."
	}
	args = append(args, program)
	args = append(args, req.GetArgs()...)

	cmd := exec.CommandContext(ctx, py.exe, args...)
	cmd.Dir = req.GetPwd()
	cmd.Env = append(withoutVars(py.env, "PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS"),
		"PULUMI_CONFIG="+string(config),
		"PULUMI_CONFIG_SECRET_KEYS="+string(secretKeys))
	// The engine shows whatever the host prints as the program's diagnostics.
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }

	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return &pulumirpc.RunResponse{}, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() == userActionableExit:
		return &pulumirpc.RunResponse{Bail: true}, nil
	case errors.As(err, &exitErr):
		return &pulumirpc.RunResponse{
			Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exitErr.ExitCode()),
		}, nil
	default:
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("could not run %s: %v", py.exe, err)}, nil
	}
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func nonNilSlice(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
