// Command pulumi-language-sdkgen is mm2spec's own Pulumi language host for SDK generation only: it
// answers `pulumi package gen-sdk --language nodejs|go` for the mm2spec package (and any schema).
//
// Pulumi's own hosts (github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3 and
// .../sdk/go/pulumi-language-go/v3) are separate Go modules that the Go module proxy this project
// can reach does not serve. Their GeneratePackage is a thin wrapper around the code generators in
// github.com/pulumi/pulumi/pkg/v3/codegen/{nodejs,go}, which this module already requires, so this
// host calls exactly those. scripts/install-pulumi.sh builds it once and installs it under both
// names, pulumi-language-nodejs and pulumi-language-go; the language is taken from the name it is
// run as. Running programs, installing dependencies, packing and linking SDKs are not supported.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	gogen "github.com/pulumi/pulumi/pkg/v3/codegen/go"
	nodejsgen "github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	codegenrpc "github.com/pulumi/pulumi/sdk/v3/proto/go/codegen"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// version is stamped by scripts/install-pulumi.sh with -ldflags "-X main.version=v<PULUMI_VERSION>".
var version = "v0.0.0-dev"

const namePrefix = "pulumi-language-"

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	language string
}

func main() {
	language := strings.TrimPrefix(filepath.Base(os.Args[0]), namePrefix)
	if len(os.Args) == 2 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(version)
		return
	}
	if language != "nodejs" && language != "go" {
		fmt.Fprintf(os.Stderr, "%s: install this binary as %snodejs or %sgo (the name says the language)\n",
			filepath.Base(os.Args[0]), namePrefix, namePrefix)
		os.Exit(1)
	}
	h := &host{language: language}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, h)
			return nil
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s%s: could not start the gRPC server: %v\n", namePrefix, language, err)
		os.Exit(1)
	}
	// The engine reads exactly one line from stdout: the port to dial.
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintf(os.Stderr, "%s%s: %v\n", namePrefix, language, err)
		os.Exit(1)
	}
}

func (h *host) Handshake(context.Context, *pulumirpc.LanguageHandshakeRequest) (
	*pulumirpc.LanguageHandshakeResponse, error,
) {
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

// GeneratePackage binds the schema (references to other packages resolved through the engine's
// loader) and writes what the language's code generator returns into req.Directory.
func (h *host) GeneratePackage(ctx context.Context, req *pulumirpc.GeneratePackageRequest) (
	*pulumirpc.GeneratePackageResponse, error,
) {
	loader, err := schema.NewLoaderClient(req.GetLoaderTarget())
	if err != nil {
		return nil, err
	}
	defer loader.Close()

	var spec schema.PackageSpec
	if err := json.Unmarshal([]byte(req.GetSchema()), &spec); err != nil {
		return nil, fmt.Errorf("the package schema is not valid JSON: %w", err)
	}
	cached := schema.NewCachedLoader(loader)
	pkg, diags, err := schema.BindSpec(spec, cached, schema.ValidationOptions{AllowDanglingReferences: true})
	if err != nil {
		return nil, err
	}
	if diags.HasErrors() {
		return &pulumirpc.GeneratePackageResponse{Diagnostics: rpcDiagnostics(diags)}, nil
	}

	var files map[string][]byte
	switch h.language {
	case "nodejs":
		files, err = nodejsgen.GeneratePackage(namePrefix+h.language, pkg, req.GetExtraFiles(),
			req.GetLocalDependencies(), req.GetLocal(), cached)
	case "go":
		files, err = gogen.GeneratePackage(namePrefix+h.language, pkg, req.GetLocalDependencies())
		for name, data := range req.GetExtraFiles() {
			files[name] = data
		}
	}
	if err != nil {
		return nil, err
	}
	if err := writeFiles(req.GetDirectory(), files); err != nil {
		return nil, err
	}
	return &pulumirpc.GeneratePackageResponse{Diagnostics: rpcDiagnostics(diags)}, nil
}

func writeFiles(dir string, files map[string][]byte) error {
	if dir == "" {
		return errors.New("GeneratePackage: no output directory given")
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		out := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(out, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// rpcDiagnostics turns the binder's warnings and errors into what the engine prints.
func rpcDiagnostics(diags hcl.Diagnostics) []*codegenrpc.Diagnostic {
	out := make([]*codegenrpc.Diagnostic, 0, len(diags))
	for _, d := range diags {
		severity := codegenrpc.DiagnosticSeverity_DIAG_WARNING
		if d.Severity == hcl.DiagError {
			severity = codegenrpc.DiagnosticSeverity_DIAG_ERROR
		}
		out = append(out, &codegenrpc.Diagnostic{Severity: severity, Summary: d.Summary, Detail: d.Detail})
	}
	return out
}
