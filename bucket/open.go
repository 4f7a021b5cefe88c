package bucket

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// URLSyntax is the bucket URL syntax Open accepts, for usage messages.
const URLSyntax = `s3://BUCKET[/PREFIX][?endpoint=HOST[:PORT]][&region=REGION][&insecure=1]
  file:///ABSOLUTE/DIR   (or a path starting with /, ./ or ../)`

// Defaults for s3:// URLs.
const (
	defaultS3Endpoint = "s3.amazonaws.com"
	defaultS3Region   = "us-east-1"
)

// Open returns the bucket a URL names.
//
//	s3://BUCKET/PREFIX?endpoint=HOST:PORT&region=REGION&insecure=1
//
// An S3 bucket. PREFIX (optional) is prepended to every key with a "/"
// between. endpoint defaults to AWS (s3.amazonaws.com); region to
// $AWS_REGION, else us-east-1; insecure=1 speaks plain HTTP (loopback test
// servers). Any other query parameter is an error, so a typo is not silently
// ignored. Credentials are never part of the URL: they come from
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, then the
// MinIO variables, ~/.aws/credentials, ~/.mc/config.json and the EC2/ECS
// instance role, in that order. Open makes no request; a missing bucket
// shows on first use.
//
//	file:///ABSOLUTE/DIR
//
// A directory bucket (see Dir). The directory is created (mode 0755, with
// its parents) if missing: the directory bucket is the embedded default and
// should work out of the box for a writer. A plain path is accepted too if
// it is unmistakably one: absolute, or starting with ./ or ../; anything
// else without a scheme ("mybucket/prefix") is an error rather than a
// directory created by accident.
//
// Open is for writers. Code that only reads uses OpenExisting, so that a
// mistyped URL is an error rather than a new, empty bucket.
func Open(ctx context.Context, rawURL string) (Bucket, error) {
	return open(ctx, rawURL, true)
}

// OpenExisting returns the bucket a URL names, as Open does, but creates
// nothing: a file:// directory must exist (else an *Error wrapping
// ErrNoBucket that names the directory), and opening it writes nothing in
// it, not even the reserved directory or the removal of stale temporary
// files that NewDir does. The bucket is still writable: the first Put
// creates what it needs. For s3:// it is Open (which makes no request).
func OpenExisting(ctx context.Context, rawURL string) (Bucket, error) {
	return open(ctx, rawURL, false)
}

func open(ctx context.Context, rawURL string, create bool) (Bucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Each case checks err itself: returning a nil *Dir or *S3 as a Bucket
	// would make a non-nil interface.
	if isPlainPath(rawURL) {
		d, err := openDir(rawURL, create)
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, badURL(rawURL, "not a bucket URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "s3":
		s, err := openS3(rawURL, u)
		if err != nil {
			return nil, err
		}
		return s, nil
	case "file":
		d, err := openFileURL(rawURL, u, create)
		if err != nil {
			return nil, err
		}
		return d, nil
	default:
		return nil, badURL(rawURL, fmt.Sprintf("unsupported scheme %q (want s3 or file)", u.Scheme))
	}
}

// isPlainPath reports whether s is a local path rather than a URL.
func isPlainPath(s string) bool {
	return filepath.IsAbs(s) || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") ||
		s == "." || s == ".."
}

// ErrBadURL: Open was given something that is not a bucket URL it accepts.
// The message says what is wrong and shows URLSyntax.
var ErrBadURL = errors.New("invalid bucket URL")

func badURL(rawURL, why string) error {
	return fmt.Errorf("%w %q: %s; the syntax is\n  %s", ErrBadURL, rawURL, why, URLSyntax)
}

func openS3(rawURL string, u *url.URL) (*S3, error) {
	if u.User != nil {
		return nil, badURL(rawURL, "credentials do not belong in the URL (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, badURL(rawURL, "no bucket name (s3://BUCKET/...)")
	}
	if u.Fragment != "" {
		return nil, badURL(rawURL, "unexpected #fragment")
	}
	name := u.Host
	if err := s3utils.CheckValidBucketName(name); err != nil {
		return nil, badURL(rawURL, fmt.Sprintf("bucket name %q: %v", name, err))
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, badURL(rawURL, fmt.Sprintf("prefix %q: %v", prefix, err))
		}
	}

	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, badURL(rawURL, "query: "+err.Error())
	}
	endpoint, region, insecure := "", "", false
	for k, vs := range q {
		if len(vs) != 1 {
			return nil, badURL(rawURL, fmt.Sprintf("parameter %q given %d times", k, len(vs)))
		}
		v := vs[0]
		switch k {
		case "endpoint":
			if strings.Contains(v, "://") || strings.ContainsAny(v, "/?#@") || v == "" {
				return nil, badURL(rawURL, fmt.Sprintf("endpoint %q: want HOST or HOST:PORT (no scheme: use insecure=1 for plain HTTP)", v))
			}
			endpoint = v
		case "region":
			if !validRegion(v) {
				return nil, badURL(rawURL, fmt.Sprintf("region %q: want letters, digits and dashes", v))
			}
			region = v
		case "insecure":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, badURL(rawURL, fmt.Sprintf("insecure=%q: want 1 or 0", v))
			}
			insecure = b
		default:
			return nil, badURL(rawURL, fmt.Sprintf("unknown parameter %q (known: endpoint, region, insecure)", k))
		}
	}

	// The canonical URL, for String: what was given, minus nothing secret.
	canon := "s3://" + name + "/" + prefix
	var params []string
	if endpoint != "" {
		params = append(params, "endpoint="+endpoint)
	}
	if region != "" {
		params = append(params, "region="+region)
	}
	if insecure {
		params = append(params, "insecure=1")
	}
	if len(params) > 0 {
		canon += "?" + strings.Join(params, "&")
	}

	if endpoint == "" {
		endpoint = defaultS3Endpoint
	}
	if region == "" {
		region = os.Getenv("AWS_REGION")
		if !validRegion(region) {
			region = defaultS3Region
		}
	}
	client, err := minio.New(endpoint, &minio.Options{
		Creds: credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.EnvMinio{},
			&credentials.FileAWSCredentials{},
			&credentials.FileMinioClient{},
			&credentials.IAM{},
		}),
		Secure: !insecure,
		Region: region,
	})
	if err != nil {
		return nil, badURL(rawURL, err.Error())
	}
	s, err := NewS3(client, name, prefix)
	if err != nil {
		return nil, badURL(rawURL, err.Error())
	}
	s.url = canon
	return s, nil
}

func validRegion(r string) bool {
	if r == "" || len(r) > 64 {
		return false
	}
	for _, c := range r {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func openFileURL(rawURL string, u *url.URL, create bool) (*Dir, error) {
	switch {
	case u.Opaque != "":
		return nil, badURL(rawURL, "a file URL needs an absolute path: file:///ABSOLUTE/DIR (three slashes)")
	case u.Host != "" && u.Host != "localhost":
		return nil, badURL(rawURL, fmt.Sprintf("host %q in a file URL: only local directories (file:///ABSOLUTE/DIR)", u.Host))
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, badURL(rawURL, "a file URL takes no user, query or fragment")
	case u.Path == "" || u.Path == "/":
		return nil, badURL(rawURL, "no directory (file:///ABSOLUTE/DIR)")
	}
	return openDir(filepath.FromSlash(u.Path), create)
}

// openDir opens the directory bucket at path; with create, it first
// creates the directory if needed, and opens it as NewDir does.
func openDir(path string, create bool) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("bucket: directory %q: %w", path, err)
	}
	if !create {
		return newDir(abs, false)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &Error{Op: "open", Key: abs, Err: err}
	}
	return NewDir(abs)
}
