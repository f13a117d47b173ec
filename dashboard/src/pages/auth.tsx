import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { navigate } from '../router.ts';
import { refreshSession } from '../session.ts';
import { ErrorBox, Link } from '../ui.tsx';

export function SignUpPage() {
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    setBusy(true);
    setError(undefined);
    try {
      const created = await api('POST', '/v1/auth/signup', { body: { name: form.get('name'), email: form.get('email'), password: form.get('password') } });
      await refreshSession(created.workspace.id);
      navigate('/', true);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="narrow">
      <h1>Create an account</h1>
      <form onSubmit={submit}>
        <label>
          Name
          <input name="name" required maxLength={100} autoComplete="name" />
        </label>
        <label>
          E-mail
          <input name="email" type="email" required autoComplete="email" />
        </label>
        <label>
          Password
          <input name="password" type="password" required minLength={8} autoComplete="new-password" />
        </label>
        <ErrorBox error={error} />
        <button type="submit" disabled={busy}>
          Sign up
        </button>
      </form>
      <p>
        Already have an account? <Link href="/login">Log in</Link>
      </p>
    </main>
  );
}

export function LoginPage() {
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    setBusy(true);
    setError(undefined);
    try {
      await api('POST', '/v1/auth/login', { body: { email: form.get('email'), password: form.get('password') } });
      await refreshSession();
      navigate('/', true);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="narrow">
      <h1>Log in</h1>
      <form onSubmit={submit}>
        <label>
          E-mail
          <input name="email" type="email" required autoComplete="email" />
        </label>
        <label>
          Password
          <input name="password" type="password" required autoComplete="current-password" />
        </label>
        <ErrorBox error={error} />
        <button type="submit" disabled={busy}>
          Log in
        </button>
      </form>
      <p>
        New here? <Link href="/signup">Create an account</Link>
      </p>
    </main>
  );
}
